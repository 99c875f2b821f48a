"""Where student code runs, and how it is bounded.

A bubblewrap sandbox per kernel (``sandbox``, ``bwrap``, ``gpu``), prepared kernels forked
from a process that imported JAX once (``prepared`` outside, ``zygote`` inside), stale
directories swept (``kerneldirs``), and the per-notebook time, memory and output limits
(``limits``), the run's seed the kernel receives (``seed``), and the bounded process in which the
grader runs programs a kernel exported (``evaluator``).

May import: nothing else of the grader (it is the bottom layer).
"""
