"""Auto-graded exercises: ``check_*`` functions that test a learner's function.

A grader calls the learner's function on the notebook's teaching cases and on random inputs
drawn fresh each time, compares with the package's reference, and prints specific feedback:
which property failed and the smallest input that shows it. It never raises on a wrong
answer (a notebook keeps running while a student works); it returns a ``Verdict``, true when
the exercise passed, which the solution notebooks ``assert`` (and which a notebook does not
display again under the printed line). A failure on random inputs names the seed:
``check_…(my_function, seed=…)`` repeats them.

One module per notebook (``rope_in_d_dimensions`` holds 04's graders); ``grading`` holds
what they share: copies of the inputs, the forbidden shortcuts, one way to read an answer;
``worker`` where a grading runs: in a separate worker process on every platform, stopped at
the time limit ``grading.TIME_LIMIT_S`` (a notebook kernel starts it in the background when
it imports this package, so the first check does not wait). The graders are a learning aid:
they catch honest mistakes, not cheats; code that patches the grader in its own process
fools it, by design.

``python -m rope_lab.exercises grade NOTEBOOK... --csv grades.csv`` grades a folder of
students' saved notebooks (:mod:`rope_lab.exercises.submissions`).

``summary()`` prints which exercises passed in this session, to paste into a forum post
or hand in.
"""

import os
import sys

from rope_lab.exercises.absolute_position_encodings import (
    check_bits_flipped,
    check_shift_map,
    check_sinusoidal_pe,
)
from rope_lab.exercises.attention_without_position import (
    check_attention,
    check_causal_attention,
    check_inverse_permutation,
)
from rope_lab.exercises.debugging_rope import (
    check_packed_positions,
    check_partial_rotary,
    check_position_ids,
)
from rope_lab.exercises.grading import compare, report, start_worker, summary
from rope_lab.exercises.length_extrapolation import (
    check_full_turn_pairs,
    check_ntk_base,
    check_position_interpolation,
)
from rope_lab.exercises.long_range_decay import (
    check_bound_breaker,
    check_minimum_base,
    check_score_curve,
)
from rope_lab.exercises.performance import check_attainable, check_complex_rope, check_rope_bytes
from rope_lab.exercises.rope_and_linear_attention import (
    check_non_positive_normalizer,
    check_recurrent_linear_attention,
)
from rope_lab.exercises.rope_beyond_1d import check_axial_rope, check_mrope_positions
from rope_lab.exercises.rope_in_2d import check_rotation_matrix, check_score_2d
from rope_lab.exercises.rope_in_d_dimensions import (
    check_layout_permutation,
    check_rope_interleaved,
    check_rotate_half,
)
from rope_lab.exercises.rope_in_real_models import (
    check_config_inv_freq,
    check_longrope_inv_freq,
)
from rope_lab.exercises.start_here import check_scaled_dot
from rope_lab.exercises.what_changed import check_p_rope_speeds, check_seed_verdict

# in the order of the course: 00.1, 01.1, …, 09.3, then the later notebooks
GRADERS = (
    check_scaled_dot,
    check_attention, check_inverse_permutation, check_causal_attention,
    check_sinusoidal_pe, check_shift_map, check_bits_flipped,
    check_rotation_matrix, check_score_2d,
    check_rotate_half, check_rope_interleaved, check_layout_permutation,
    check_score_curve, check_bound_breaker, check_minimum_base,
    check_position_interpolation, check_ntk_base, check_full_turn_pairs,
    check_recurrent_linear_attention, check_non_positive_normalizer,
    check_axial_rope, check_mrope_positions,
    check_rope_bytes, check_attainable, check_complex_rope,
    check_config_inv_freq, check_longrope_inv_freq,
    check_position_ids, check_packed_positions, check_partial_rotary,
    check_p_rope_speeds, check_seed_verdict,
)

__all__ = [grader.__name__ for grader in GRADERS] + ["GRADERS", "compare", "report", "summary"]

# by exercise id: "08.1" → check_axial_rope
BY_EXERCISE = {grader.exercise: grader for grader in GRADERS}


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


# a notebook: its first check then finds the grader's process ready (not in the kernels of
# `python -m rope_lab.exercises grade`, which grade elsewhere)
if _in_kernel() and os.environ.get("ROPE_LAB_GRADER_PRESTART", "1") != "0":
    start_worker()
