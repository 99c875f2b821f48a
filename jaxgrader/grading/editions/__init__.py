"""The course in other languages: gettext catalogs, built editions, feedback in the student's words.

``translate`` (catalogs, editions, the ``jaxgrader translate`` command), ``translation_units``
(what a unit is, finding units and putting translations back), ``localize`` (feedback in the
submitted edition's language), ``sentences`` (the grader's own sentences, as templates).

May import: ``classrun``, ``course``, ``verdict``.
"""
