"""What a teacher reads and exports after grading.

``class_report`` (the page and table per assignment), ``similarity`` (pairs of unusually similar
submissions, side by side; fingerprints from copydetect in ``fingerprints``), ``lms_export`` (Canvas,
Moodle, CSV), ``feedback`` (feedback pages that name their parts; ``templates/``), ``exercises``
(exercise headings of the instructor's notebooks).

May import: ``editions``, ``classrun``, ``course``, ``verdict``.
"""
