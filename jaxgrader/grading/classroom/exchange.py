"""nbgrader's exchange for one course, laid out as nbgrader documents it, and closed where it is open.

The layout (nbgrader's docs, "Exchange"; its classroom demos): a root every account may enter and
write, and in it the course's folder, owned by the instructor, with ``outbound/`` (0755: released
assignments, read by all), ``inbound/`` (2733: students write submissions, nobody but the instructor
lists them) and ``feedback/`` (0711: each file named by a hash only its student can compute).

Three things stay open in nbgrader's own steps, and the classroom closes them:

* the root is 0777: any student can rename the course's folder away and put a forged one in its place.
  Here it is 1777 (sticky: only an entry's owner renames or deletes it; nbgrader's check of the root's
  mode compares only the 0777 bits), and ``inbound/`` 3733 (a student cannot remove another's entry);
* ``nbgrader submit`` leaves each submission world-readable and writable (files 0644 in a folder 0777),
  hidden only by its random name. :class:`PrivateSubmit` closes its folders to all but the student and
  the instructor's group (0770; ``inbound/`` is setgid, so they have the instructor's group);
* ``nbgrader collect`` takes the newest folder named ``<student>+<assignment>+<time>`` in ``inbound/``,
  whoever made it: a student can plant one named for another student (collect only warns), or a symlink
  to the instructor's own ``source/`` that collect copies, as the instructor, into the student's
  submission. :class:`CheckedCollect` takes only a real folder owned by the student it names, copies
  through a descriptor of that folder, and keeps no symlink.

Students' servers import this module (their nbgrader configuration names PrivateSubmit): it needs
nothing but nbgrader.
"""

from __future__ import annotations

import datetime
import os
import shutil
import stat

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import ignore_patterns

ROOT_MODE = 0o1777
COURSE_MODE = 0o755
OUTBOUND_MODE = 0o755
INBOUND_MODE = 0o3733
FEEDBACK_MODE = 0o711
SUBMISSION_DIR_MODE = 0o770  # with the instructor's group, inherited from inbound/ (setgid)


def course_folders(root: str, course_id: str) -> dict[str, tuple[str, int]]:
    """Each folder of the exchange the classroom makes: name -> (path, mode)."""
    course = os.path.join(root, course_id)
    return {"root": (root, ROOT_MODE), "course": (course, COURSE_MODE),
            "outbound": (os.path.join(course, "outbound"), OUTBOUND_MODE),
            "inbound": (os.path.join(course, "inbound"), INBOUND_MODE),
            "feedback": (os.path.join(course, "feedback"), FEEDBACK_MODE)}


def lay_out(root: str, course_id: str, instructor_uid: int, instructor_gid: int) -> list[str]:
    """Make (or put right) the exchange's folders, as root. Returns one line per change of an existing one.
    A course folder that someone other than the instructor owns is refused: it may be a student's forgery."""
    notes = []
    for name, (path, mode) in course_folders(root, course_id).items():
        owner = (0, 0) if name == "root" else (instructor_uid, instructor_gid)
        made = not os.path.lexists(path)
        if made:
            os.makedirs(path, exist_ok=True)
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise ValueError(f"{path}: not a folder")
        if name == "course" and st.st_uid not in (0, instructor_uid):
            raise ValueError(f"{path}: owned by uid {st.st_uid}, not by the instructor: move it away "
                             "(someone other than the instructor made it) and start again")
        if (st.st_uid, st.st_gid) != owner:
            os.chown(path, *owner)
            if not made:
                notes.append(f"{path}: given to {'root' if name == 'root' else 'the instructor'}")
        if stat.S_IMODE(os.lstat(path).st_mode) != mode:  # (chown may have cleared setgid)
            os.chmod(path, mode)
            if not made:
                notes.append(f"{path}: mode {oct(stat.S_IMODE(st.st_mode))[2:]} -> {oct(mode)[2:]}")
    return notes


class PrivateSubmit(ExchangeSubmit):
    """``nbgrader submit``, leaving the submission readable by its student and the instructor's group only
    (nbgrader's own leaves it world-readable, hidden by its random name)."""

    def copy_files(self):
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        # Its folders have inbound/'s group (setgid), the instructor's: only the folders can be closed, since a
        # student cannot give a file to a group they are not in, and the folders are enough.
        group = os.stat(self.inbound_path).st_gid
        for dirname, _, _ in os.walk(dest):
            if os.stat(dirname).st_gid != group:
                self.fail(f"{dirname} did not get the group of {self.inbound_path}: ask your instructor to make "
                          "inbound/ setgid (mode 3733)")
            os.chmod(dirname, SUBMISSION_DIR_MODE)


class CheckedCollect(ExchangeCollect):
    """``nbgrader collect`` that takes only real folders owned by the student they name (the rest are left
    in ``inbound/`` and named in the log as refused), copied without following any symlink."""

    def _path_to_record(self, path):
        try:
            record = super()._path_to_record(path)
        except Exception as exc:  # a name that is no timestamp would stop the whole collect
            filename = os.path.basename(path)
            self.log.error("Refused %s: not a submission's name (%s)", filename, exc)
            return {"username": filename.split("+")[0], "filename": filename,
                    "timestamp": datetime.datetime.min, "problem": f"not a submission's name ({exc})"}
        problem = self._problem(path, record["username"])
        if problem:
            self.log.error("Refused %s: %s", record["filename"], problem)
            record["problem"] = problem
            record["timestamp"] = datetime.datetime.min  # never the newest of the student's
        return record

    def _problem(self, path: str, username: str) -> str | None:
        import pwd

        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            return "not a folder (a symlink or a file)"
        try:
            uid = pwd.getpwnam(username).pw_uid
        except KeyError:
            return f"no account {username}"
        if st.st_uid != uid:
            owner = next((p.pw_name for p in pwd.getpwall() if p.pw_uid == st.st_uid), st.st_uid)
            return f"named for {username} but made by {owner}"
        return None

    def copy_files(self):
        self.src_records = [r for r in self.src_records if not r.get("problem")]  # (each said why when found)
        super().copy_files()

    def do_copy(self, src, dest, log=None):
        """Copy through a descriptor of the checked folder (it cannot be swapped for a symlink meanwhile);
        symlinks inside are copied as links and then removed."""
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            pinned = f"/proc/self/fd/{fd}"
            if os.fstat(fd).st_uid != os.lstat(src).st_uid:
                raise RuntimeError(f"{src} changed while it was collected")
            size = self.get_size(pinned)
            if size > 1000 * self.coursedir.max_dir_size:
                raise RuntimeError(f"Directory size is too big. Size is {size}, "
                                   f"maximum size is {1000 * self.coursedir.max_dir_size}")
            shutil.copytree(pinned, dest, symlinks=True,
                            ignore=ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                                   max_file_size=self.coursedir.max_file_size, log=self.log))
        finally:
            os.close(fd)
        for dirname, dirnames, filenames in os.walk(dest):
            for name in dirnames + filenames:
                path = os.path.join(dirname, name)
                if os.path.islink(path):
                    self.log.error("Removed a symlink from a submission: %s -> %s", path, os.readlink(path))
                    os.unlink(path)
