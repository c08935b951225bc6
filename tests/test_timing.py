"""rope_lab.timing: the one harness (turns, paired ratios, quartiles), the thread pinner,
fresh pages before each CPU call, and the provenance record. No assertion on a live time."""

import pytest
import torch

import rope_lab as rl
from rope_lab import bench, timing


def test_paired_ratios_and_quartiles():
    samples = {"clone": [1.0, 2.0, 4.0, 1.0, 2.0], "f": [1.5, 2.0, 6.0, 1.1, 3.0]}
    assert timing.paired_ratios(samples, "f") == [1.5, 1.0, 1.5, 1.1, 1.5]
    assert timing.quartiles([1.5, 1.0, 1.5, 1.1, 1.5]) == (1.1, 1.5, 1.5)
    assert timing.quartiles([2.0]) == (2.0, 2.0, 2.0)
    turns = timing.time_in_turns({"a": lambda: None, "b": lambda: None}, device="cpu",
                                warmup=0, repeats=3)
    assert [len(times) for times in turns.values()] == [3, 3]


def test_repeats_below_one_are_refused(capsys):
    with pytest.raises(ValueError, match=r"repeats must be a whole number ≥ 1, got 0"):
        timing.time_in_turns({"a": lambda: None}, device="cpu", repeats=0)
    assert bench.main(["--repeats", "0"]) == 2  # one line, exit status 2
    assert "--repeats 0: must be at least 1" in capsys.readouterr().err


def test_cpu_threads_restores_the_previous_count():
    previous = torch.get_num_threads()
    with timing.cpu_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == previous


def test_provenance_names_the_machine_and_versions():
    record = timing.provenance("cpu", torch.float32)
    assert record["device"] == "cpu" and record["dtype"] == "float32"
    assert record["torch"] == torch.__version__ and record["rope_lab"] == rl.__version__


def test_release_free_memory_reports_whether_it_ran():
    import platform as platform_module

    ran = timing.release_free_memory()
    assert ran == (timing._malloc_trim() is not None)
    if platform_module.system() == "Linux" and platform_module.libc_ver()[0] == "glibc":
        assert ran
