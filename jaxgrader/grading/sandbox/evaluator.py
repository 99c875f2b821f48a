"""The bounded process in which the grader runs programs a student's kernel exported.

A hidden test can hand the grader a program (``jaxgrader.checks.programs.exported``: StableHLO
serialized by ``jax.export``). The grader runs it on inputs the kernel never saw
(``jaxgrader.grading.verdict.artifacts``), so a program that passes computes the answer. The
program comes from an untrusted kernel, so it runs here, not in the grader:

* in a process of its own, inside the same bubblewrap sandbox as a kernel (no network, no view
  of the course, an unprivileged uid, rlimits) when the course grades sandboxed, with a wall-clock
  timeout and its resident memory watched from outside;
* on the CPU, with as many simulated devices as the programs ask for (deterministic, and as
  precise as the reference's own run of the same program);
* only after its module is read: a custom call other than the sharding markers JAX writes
  (a host callback would point into the kernel's memory), or an infeed, outfeed, send or recv,
  refuses the program without running it.

``run_programs`` is the grader's side; ``main`` (``python -m jaxgrader.grading.sandbox.evaluator
DIR``) the sandboxed process's. They exchange files in DIR: ``jobs.json`` and one ``.npz`` of
inputs and one program file per job in, ``results.json`` and one ``.npz`` of outputs per job out.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The custom calls JAX itself writes for shardings; any other target refuses the program.
ALLOWED_CUSTOM_CALLS = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"}
FORBIDDEN_OPS = re.compile(r"\b(?:stablehlo|mhlo)\.(infeed|outfeed|send|recv)\b")
_CUSTOM_CALL = re.compile(r'custom_call\s*@([\w.$-]+)|call_target_name\s*=\s*"([^"]*)"')
_TENSOR = re.compile(r"tensor<((?:\d+x)*)[a-z]\w*")
_COLLECTIVE = re.compile(r"\bstablehlo\.(all_reduce|all_gather|reduce_scatter|all_to_all|collective_permute|"
                         r"collective_broadcast)\b")
_MANUAL_IN = re.compile(r"sdy\.manual_computation\(.*?in_shardings=\[(.*?)\]\s*out_shardings=")
_FULL_TO_SHARD_SHAPES = re.compile(
    r"custom_call\s*@SPMDFullToShardShape\(.*?\(tensor<([\dx]*)\w+>\)\s*->\s*tensor<([\dx]*)\w+>")
_OP_LINE = re.compile(r"^\s*(?:%[^=]+=\s*)?\"?(?:stablehlo|chlo|mhlo|sdy|shardy)\.\w+", re.MULTILINE)
_FUNC = re.compile(r"^\s*func\.func\s+(?:public\s+|private\s+)?@([\w.$-]+)")
_CALL = re.compile(r"^\s*(?:%[^=]+=\s*)?(?:func\.)?call\s+@([\w.$-]+)")
MAX_DEVICES = 64


@dataclasses.dataclass
class Job:
    """One program to run on the given inputs (flat arrays, in the program's order); ``also``: a second set of
    inputs to run the same compiled program on (the kernel's own, to tie the program to what the function
    returned there)."""

    program: bytes
    inputs: list[np.ndarray]
    also: list[np.ndarray] | None = None
    chunked: bool = False  # the last input is a batch of examples, given in the program's batch size (scores)


@dataclasses.dataclass
class Outcome:
    """What running a job gave: outputs (and ``also_outputs`` on the job's second inputs), or an error; the
    program's form (see ``program_form``; ``memory``: XLA's temporary bytes for the compiled program)."""

    outputs: list[np.ndarray] | None = None
    error: str = ""
    form: dict = dataclasses.field(default_factory=dict)
    also_outputs: list[np.ndarray] | None = None


def program_form(text: str) -> dict:
    """What the grader bounds of a program, read off its module text: the entries of its largest value, its
    operations (:func:`operations`: every call written out, so an unrolled loop has one copy per iteration
    whatever its spelling), its while loops, the collectives it has, and the mesh axes its shard_maps split an
    input over. (Its memory is XLA's own analysis of the compiled program: ``_run_one``.)"""
    entries = [int(np.prod([int(d) for d in dims.split("x") if d])) if dims else 1
               for dims in _TENSOR.findall(text)]
    return {"entries": max(entries, default=0), "ops": operations(text),
            "whiles": len(re.findall(r"\bstablehlo\.while\b", text)),
            "collectives": sorted(set(_COLLECTIVE.findall(text))), "split_over": split_over(text),
            "donated": donated(text)}


def donated(text: str) -> int:
    """How many inputs of the program's ``main`` are donated (``donate_argnums``: they alias an output, or are
    marked buffer donors), read off its signature."""
    main = next((line for line in text.splitlines() if re.search(r"func\.func public @main\(", line)), "")
    return sum("tf.aliasing_output" in piece or "jax.buffer_donor" in piece
               for piece in re.split(r"%arg\d+:", main.split(") ->")[0])[1:])


def operations(text: str) -> int:
    """The operations the program runs, each call site counted with everything its callee runs.

    JAX writes a nested ``jax.jit`` (and ``jax.checkpoint``, custom derivatives and some library functions) as a
    private function and a ``call`` of it at each use, so counting the module's lines counts a Python loop of ``n``
    jitted steps as ``n`` lines and the step once. Written out, it counts ``n`` steps, as ``scan(unroll=True)`` or
    a plain Python loop inside one ``jit`` do; a ``while`` (a rolled scan or fori_loop) counts its body once.
    """
    own: dict[str, int] = {}
    calls: dict[str, list[str]] = {}
    current = "main"
    for line in text.splitlines():
        found = _FUNC.match(line)
        if found:
            current = found.group(1)
            own.setdefault(current, 0)
            calls.setdefault(current, [])
            continue
        callee = _CALL.search(line)
        if callee:
            calls.setdefault(current, []).append(callee.group(1))
            own[current] = own.get(current, 0) + 1
        elif _OP_LINE.match(line):
            own[current] = own.get(current, 0) + 1
    total: dict[str, int] = {}

    def count(name: str, depth: int = 0) -> int:
        if name not in total:
            total[name] = 0  # a cycle (not written by JAX) counts once
            if depth < 64:
                total[name] = own.get(name, 0) + sum(count(c, depth + 1) for c in calls.get(name, []))
        return total[name]

    return count("main") if "main" in own else sum(own.values())


def split_over(text: str) -> list[str]:
    """The mesh axes some input of a manual region (``shard_map``) is split over: ``["data"]`` for a batch
    split over a data axis, ``[]`` where every device gets every input whole. Read from Shardy's
    ``in_shardings`` of each ``sdy.manual_computation`` (both JAX versions export with Shardy), or, for
    GSPMD text, from a ``SPMDFullToShardShape`` whose result is smaller than its operand."""
    axes = set()
    for specs in _MANUAL_IN.findall(text):
        axes |= set(re.findall(r'"([^"]+)"', specs))
    for operand, result in _FULL_TO_SHARD_SHAPES.findall(text):
        if operand != result:
            axes.add("(devices)")
    return sorted(axes)


def refusal(text: str) -> str:
    """'' if the module may run here, else why not."""
    for match in _CUSTOM_CALL.finditer(text):
        target = match.group(1) or match.group(2)
        if target not in ALLOWED_CUSTOM_CALLS:
            return f"the program calls out of XLA ({target[:40]}); only plain computations are run"
    found = FORBIDDEN_OPS.search(text)
    if found:
        return f"the program uses {found.group(1)} (host transfer); only plain computations are run"
    return ""


# --------------------------------------------------------------------------- the grader's side


def run_programs(jobs: list[Job], *, sandboxed: bool = True, timeout_s: float = 120.0,
                 memory_mb: int = 4096) -> list[Outcome]:
    """Run every job in one bounded process; one Outcome per job, in order (errors per job)."""
    if not jobs:
        return []
    with tempfile.TemporaryDirectory(prefix="jaxgrader-programs-") as tmp:
        folder = Path(tmp)
        os.chmod(folder, 0o777)  # the sandboxed process runs as an unprivileged uid
        listing = []
        for i, job in enumerate(jobs):
            (folder / f"program-{i}").write_bytes(job.program)
            np.savez(folder / f"inputs-{i}.npz", **{f"a{k}": np.asarray(x) for k, x in enumerate(job.inputs)})
            if job.also is not None:
                np.savez(folder / f"also-{i}.npz", **{f"a{k}": np.asarray(x) for k, x in enumerate(job.also)})
            listing.append({"id": i, "inputs": len(job.inputs), "also": job.also is not None,
                            "chunked": job.chunked})
        (folder / "jobs.json").write_text(json.dumps(listing))
        for path in folder.iterdir():
            os.chmod(path, 0o644)
        error = _run(folder, sandboxed, timeout_s, memory_mb)
        return [_outcome(folder, i, error) for i in range(len(jobs))]


def _run(folder: Path, sandboxed: bool, timeout_s: float, memory_mb: int) -> str:
    """Run the evaluator process on ``folder``; '' on success, else why it failed as a whole."""
    from .bwrap import SYSTEM_PATH, limits_command, python_roots, read_only_paths, sandbox_command
    from .limits import MemoryWatchdog

    env = {"PATH": SYSTEM_PATH, "HOME": str(folder), "JAX_PLATFORMS": "cpu", "PYTHONNOUSERSITE": "1",
           "TMPDIR": str(folder)}
    command = [sys.executable, "-m", "jaxgrader.grading.sandbox.evaluator", str(folder)]
    limits = limits_command(nproc=0, fsize_mb=256, cpu_s=int(timeout_s * 4), as_mb=0)
    if sandboxed:
        ro, _ = read_only_paths(python_roots(sys.executable))
        command = limits + sandbox_command(command, env=env, ro=ro, rw=[str(folder)], chdir=str(folder),
                                           as_root=os.geteuid() == 0)
        env = {"PATH": SYSTEM_PATH}
    else:
        command = limits + command
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, cwd=str(folder), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watchdog = MemoryWatchdog(proc.pid, memory_mb * 2**20)
    watchdog.start()
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"the programs ran past {timeout_s:.0f} s"
    finally:
        watchdog.stop()
    if watchdog.tripped_at:
        return f"the programs used more than {memory_mb} MiB"
    if proc.returncode != 0 and not (folder / "results.json").exists():
        last = (stderr.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return f"the program runner failed after {time.monotonic() - started:.0f} s: {last[:200]}"
    return ""


def _outcome(folder: Path, i: int, error: str) -> Outcome:
    if error:
        return Outcome(error=error)
    try:
        results = json.loads((folder / "results.json").read_text())
        result = results[str(i)]
    except (OSError, ValueError, KeyError):
        return Outcome(error="the program runner stopped before this program")
    if result.get("error"):
        return Outcome(error=str(result["error"])[:300], form=result.get("form") or {})
    with np.load(folder / f"outputs-{i}.npz", allow_pickle=False) as data:
        outputs = [data[f"a{k}"] for k in range(len(data.files))]
    also = None
    if (folder / f"also-outputs-{i}.npz").exists():
        with np.load(folder / f"also-outputs-{i}.npz", allow_pickle=False) as data:
            also = [data[f"a{k}"] for k in range(len(data.files))]
    return Outcome(outputs=outputs, form=result.get("form") or {}, also_outputs=also)


# --------------------------------------------------------------------------- the sandboxed process


def _read(folder: Path, i: int):
    """(the deserialized program, its module text) or (None, why not); no backend is started."""
    from jax import export

    try:
        program = export.deserialize(bytearray((folder / f"program-{i}").read_bytes()))
        return program, program.mlir_module()
    except Exception as exc:  # noqa: BLE001  anything a malformed program raises
        return None, f"not a program jax.export can read ({type(exc).__name__})"


def _inputs(folder: Path, name: str, count: int, program) -> list:
    """The arrays of ``name`` (an .npz of the job's), laid out over the devices as the program was exported for."""
    import jax

    with np.load(folder / name, allow_pickle=False) as data:
        inputs = [data[f"a{k}"] for k in range(count)]
    if program.nr_devices > 1:  # laid out over the devices as the program was exported for (else replicated)
        mesh = _mesh_for(program)
        everywhere = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        inputs = [jax.device_put(x, s if s is not None else everywhere)
                  for x, s in zip(inputs, program.in_shardings_jax(mesh))]
    return inputs


def _chunks(compiled, inputs: list, size: int) -> list[np.ndarray]:
    """``compiled`` on the examples of the last input, ``size`` at a time (the last chunk padded with copies of its
    first example): the outputs concatenated, one row per example."""
    examples = np.asarray(inputs[-1])
    pieces = []
    for start in range(0, len(examples), size):
        chunk = examples[start:start + size]
        padded = np.concatenate([chunk, np.repeat(chunk[:1], size - len(chunk), axis=0)]) if len(chunk) < size else chunk
        outs = [np.asarray(o) for o in _leaves_of(compiled(*inputs[:-1], padded))]
        pieces.append([o[:len(chunk)] for o in outs])
    return [np.concatenate(parts) for parts in zip(*pieces)]


def _leaves_of(tree):
    import jax

    return jax.tree.leaves(tree)


def _run_one(folder: Path, i: int, count: int, program, text: str, also: bool = False, chunked: bool = False) -> dict:
    import jax

    form = program_form(text)
    form["in_avals"] = [str(a) for a in program.in_avals]
    form["in_shardings"], form["out_shardings"] = _layout(program, "in"), _layout(program, "out")
    form["devices"] = int(program.nr_devices)
    problem = refusal(text)
    if problem:
        return {"error": problem, "form": form}
    if program.nr_devices > len(jax.devices()):
        return {"error": f"the program needs {program.nr_devices} devices", "form": form}
    wanted = [(tuple(a.shape), str(a.dtype)) for a in program.in_avals]
    with np.load(folder / f"inputs-{i}.npz", allow_pickle=False) as data:
        given = [(tuple(data[f"a{k}"].shape), str(data[f"a{k}"].dtype)) for k in range(count)]
    if chunked and given and wanted and given[-1][0][1:] == wanted[-1][0][1:] and wanted[-1][0]:
        given[-1] = wanted[-1] if given[-1][1] == wanted[-1][1] else given[-1]  # any number of examples
    if given != wanted:
        return {"error": "a program for other inputs than this test's: it takes "
                         + ", ".join(f"{d}{list(s)}" for s, d in wanted)[:200], "form": form}
    inputs = _inputs(folder, f"inputs-{i}.npz", count, program)
    try:
        # compiled once, here: XLA's memory analysis of the very program whose outputs are judged
        if chunked:
            size = program.in_avals[-1].shape[0]
            compiled = jax.jit(program.call).lower(*inputs[:-1], np.asarray(inputs[-1])[:1].repeat(size, 0)).compile()
            outputs = _chunks(compiled, inputs, size)
        else:
            compiled = jax.jit(program.call).lower(*inputs).compile()
            outputs = [np.asarray(o) for o in jax.tree.leaves(compiled(*inputs))]
        form["memory"] = _temporary_bytes(compiled)
        if also:
            again = _inputs(folder, f"also-{i}.npz", count, program)
            if [(tuple(x.shape), str(x.dtype)) for x in again] != wanted:
                return {"error": "the program does not take the inputs the test called the function with",
                        "form": form}
            also_outputs = [np.asarray(o) for o in jax.tree.leaves(compiled(*again))]
            np.savez(folder / f"also-outputs-{i}.npz", **{f"a{k}": o for k, o in enumerate(also_outputs)})
    except Exception as exc:  # noqa: BLE001  the program failed on these inputs
        return {"error": f"the program failed on the grader's inputs ({type(exc).__name__}: {str(exc)[:120]})",
                "form": form}
    np.savez(folder / f"outputs-{i}.npz", **{f"a{k}": o for k, o in enumerate(outputs)})
    return {"form": form}


def _temporary_bytes(compiled) -> int | None:
    """XLA's temporary memory for ``compiled`` (its buffers other than arguments and outputs), or None where
    this backend does not say."""
    try:
        analysis = compiled.memory_analysis()
        return None if analysis is None else int(analysis.temp_size_in_bytes)
    except Exception:  # noqa: BLE001  not every backend or version reports it
        return None


def _layout(program, side: str) -> list[str]:
    """How each input (``side="in"``) or output is laid out over devices, the same for any mesh of the same
    shape: a partition spec (newer JAX keeps named shardings) or XLA's sharding; unspecified and fully
    replicated read alike, as "replicated"."""
    named = getattr(program, f"_{side}_named_shardings", None)
    if named is not None and any(s is not None for s in named):
        specs = [None if s is None else tuple(s.spec) for s in named]
        return ["replicated" if s is None or all(a is None for a in s) else str(s) for s in specs]
    return ["replicated" if str(s) in ("None", "{replicated}") else str(s)
            for s in getattr(program, f"{side}_shardings_hlo")]


def _mesh_for(program):
    """A mesh of this process's devices shaped as the one the program was exported with (newer JAX keeps
    its axis names, sizes and types and wants them back; older JAX takes any mesh of as many devices)."""
    import jax

    devices = np.array(jax.devices()[:program.nr_devices])
    exported_with = [s.mesh for s in getattr(program, "_in_named_shardings", ()) or () if s is not None]
    if exported_with:
        m = exported_with[0]
        return jax.sharding.Mesh(devices.reshape(m.axis_sizes), m.axis_names, axis_types=m.axis_types)
    return jax.sharding.Mesh(devices, ("devices",))


def main(argv: list[str] | None = None) -> int:
    folder = Path((argv or sys.argv[1:])[0])
    jobs = json.loads((folder / "jobs.json").read_text())
    read = {int(job["id"]): _read(folder, int(job["id"])) for job in jobs}
    devices = max([p.nr_devices for p, _ in read.values() if p is not None and 0 < p.nr_devices <= MAX_DEVICES],
                  default=1)
    # before the backend starts: as many simulated CPU devices as the programs were exported for, and
    # LLVM's optimisations off (each program runs once, on small inputs: compiling is most of its cost;
    # the student's program and the reference's are compiled alike, here). Lesson 4's run of 11 programs:
    # 3.9 -> 2.6 s.
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices} --xla_backend_optimization_level=0"
    results = {}
    for job in jobs:
        i = int(job["id"])
        program, text = read[i]
        results[str(i)] = ({"error": text} if program is None
                           else _run_one(folder, i, int(job["inputs"]), program, text, bool(job.get("also")),
                                        bool(job.get("chunked"))))
        (folder / "results.json").write_text(json.dumps(results))  # what is done survives a later crash
    return 0


if __name__ == "__main__":
    sys.exit(main())
