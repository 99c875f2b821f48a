"""The course directory and its settings: what every job below the commands shares.

``coursedir`` (paths through nbgrader's ``CourseDirectory.format_path``, the gradebook URL,
isolation), ``config`` (loading ``nbgrader_config.py``), ``settings`` (``c.JaxGrader``),
``notebooks`` (reading a notebook safely; nbgrader cell metadata).

May import: ``sandbox`` and ``verdict``.
"""
