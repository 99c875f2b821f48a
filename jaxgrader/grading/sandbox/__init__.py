"""Where student code runs, and how it is bounded.

A bubblewrap sandbox per kernel (``sandbox``, ``bwrap``, ``gpu``), prepared kernels forked
from a process that imported JAX once (``prepared`` outside, ``zygote`` inside), stale
directories swept (``kerneldirs``), and the per-notebook time, memory and output limits
(``limits``).

May import: ``verdict`` (the run's seed, which the kernel receives) and ``course.settings``.
"""
