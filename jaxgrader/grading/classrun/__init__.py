"""One class run: intake, the reference run, tasks out to workers, records in, one writer.

``run`` (the phases of ``grade_class``), ``task`` (one submission graded in a private
course, on any worker), ``backends`` (local processes, Dask), ``references`` (reference run
and template gradebook), ``records`` (what travels), ``gradebook`` (the only writer),
``ledger`` (what is kept between runs), ``intake`` (LMS file names), ``table`` (the summary),
``preprocessors`` (nbgrader steps: a submission cleaned before it runs; hidden tests hidden
in feedback).

May import: ``course``, ``sandbox``, ``verdict``.
"""
