"""The diagnosis benchmark's scenarios: one injected cause each, and what tuiprof must say first.

A scenario is run one of five ways (``how``):

- ``script``: ``tuiprof run --no-tui --save`` of ``scenarios/<script>.py`` with its ``args``,
  then again with ``--remedy``; the metric of each capture is measured by tuiprof's views;
- ``torchrun``: the same under ``torchrun --nproc-per-node <ranks>`` (gloo, CPU), read as a
  run directory;
- ``diff``: the two captures of ``script`` (A: injected, B: ``--remedy``) compared by
  ``tuiprof diff``: its verdict is checked against each side's steps and known batch;
- ``synthetic``: a GPU trace pair written by gpu_traces.py (``builder``), the cause built in
  and the remedied trace built without it;
- ``external``: a checker script another part of the project writes (``checker``, relative to
  the repository); its rows are folded into the table (run.py says how).

``ids``: the finding ids that name the cause (the first is the issue's; others are the same
rule under a name it has had); ``names``: what the finding's text must name, every one
(a module's qualified name, a rank; matched as a whole name, not inside a longer one);
``remedy``: the finding's remedy must contain every word of at least one group (case
insensitive).  For memory scenarios the ids are any ``memory-*`` finding (``MEMORY``), and
``names`` groups the words any of which names the cause.
"""

from __future__ import annotations

from dataclasses import dataclass

STEP_TIME, PEAK_MEMORY = "step_us", "peak_bytes"  # report/findings.py's metrics
MEMORY = ("memory-*",)  # any memory finding (memory scenarios take the first with a peak_bytes saving)
TIME_SCHEDULE = ("--wait", "2", "--warmup", "2", "--active", "8")
MEMORY_SCHEDULE = ("--wait", "1", "--warmup", "1", "--active", "2")  # the peak is the same every step


@dataclass(frozen=True)
class Scenario:
    name: str  # short: the table's first column (16 characters at most)
    how: str  # script, torchrun, diff, synthetic, external
    cause: str  # the injected cause, in a few words
    metric: str = STEP_TIME
    ids: tuple[str, ...] = ()
    names: tuple[tuple[str, ...], ...] = ()  # every group must be named; any word of a group names it
    remedy: tuple[tuple[str, ...], ...] = ()  # any group; every word of it in the remedy
    script: str = ""  # scenarios/<script>.py
    args: tuple[str, ...] = ()
    ranks: int = 0  # torchrun's --nproc-per-node
    builder: str = ""  # gpu_traces.BUILDERS key
    checker: str = ""  # external: the script, relative to the repository
    what_if: str = ""  # memory: the memory-what-ifs row whose saving is shown beside the finding's
    batches: tuple[int, int] = ()  # diff: the batch of A and of B, known by construction
    quick: bool = False  # in the CI subset (--quick)

    @property
    def schedule(self) -> tuple[str, ...]:
        return MEMORY_SCHEDULE if self.metric == PEAK_MEMORY else TIME_SCHEDULE


def _ranks(name: str, ranks: int, slow: tuple[str, ...], rank: int, remedy: tuple[tuple[str, ...], ...]) -> Scenario:
    return Scenario(
        name,
        "torchrun",
        f"{ranks} ranks, slowed: " + ", ".join(slow),
        ids=("straggler",),
        names=((f"rank {rank}",),),
        remedy=remedy,
        script="ranks",
        args=tuple(arg for spec in slow for arg in ("--slow", spec)),
        ranks=ranks,
    )


IN_BLOCK_1 = (("blocks.1",),)  # the remedy names where the extra time is: the module's forward
EXTRA_MATMULS = (("blocks.1",), ("aten::mm",), ("matmul",))
WORKERS = (("num_workers",),)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "data-loading",
        "script",
        "Dataset sleeps 0.6 ms a sample (batch 64), num_workers=0",
        ids=("data-loading",),
        remedy=WORKERS,
        script="data_loading",
        quick=True,
    ),
    Scenario(
        "module-sleep",
        "script",
        "blocks.2's forward sleeps 20 ms",
        ids=("module-host-time", "slow-module"),
        names=(("blocks.2",),),
        remedy=(("blocks.2", "forward"),),
        script="slow_block",
        args=("--cause", "sleep"),
    ),
    Scenario(
        "module-work",
        "script",
        "blocks.1 does 12 extra matmuls",
        ids=("top-module", "slow-module"),
        names=(("blocks.1",),),
        remedy=(("blocks.1",),),
        script="slow_block",
        args=("--cause", "matmul"),
    ),
    Scenario(
        "outside-modules",
        "script",
        "small no_grad ops between backward and step",
        ids=("outside-modules",),
        remedy=(("out of the step",), ("every", "steps"), ("outside_modules.py",)),  # move it, do it less often
        script="outside_modules",
    ),
    Scenario(
        "momentum",
        "script",
        "SGD momentum buffers at the peak",
        metric=PEAK_MEMORY,
        ids=MEMORY,
        names=(("momentum", "optimizer state"),),
        remedy=(("momentum",),),
        script="momentum",
        what_if="SGD without momentum",
        quick=True,
    ),
    Scenario(
        "adam",
        "script",
        "Adam's moment buffers at the peak",
        metric=PEAK_MEMORY,
        ids=MEMORY,
        names=(("Adam", "optimizer state"),),
        remedy=(("Adam",), ("state",)),
        script="adam",
        what_if="SGD without momentum",
    ),
    Scenario(
        "grads-kept",
        "script",
        "zero_grad(set_to_none=False)",
        metric=PEAK_MEMORY,
        ids=MEMORY,
        names=(("gradient",),),
        remedy=(("set_to_none",),),
        script="grads_kept",
        what_if="Gradients to None",
    ),
    Scenario(
        "batch-halved",
        "script",
        "batch 1024, activation-heavy",
        metric=PEAK_MEMORY,
        ids=MEMORY,
        names=(("activation", "batch"),),
        remedy=(("batch",),),
        script="batch_halved",
        what_if="Half the batch",
    ),
    Scenario(
        "diff-batch",
        "diff",
        "batch doubled: faster per sample, slower per step",
        script="diff_batch",
        batches=(64, 128),
    ),
    _ranks("ranks2-sleep", 2, ("1:sleep",), 1, IN_BLOCK_1),
    _ranks("ranks2-matmul", 2, ("1:matmul:96",), 1, EXTRA_MATMULS),
    _ranks("ranks2-data", 2, ("1:data",), 1, WORKERS),
    _ranks("ranks4-sleep", 4, ("2:sleep",), 2, IN_BLOCK_1),
    _ranks("ranks4-matmul", 4, ("3:matmul:32",), 3, EXTRA_MATMULS),  # 4 ranks share 2 cores: each matmul costs more
    _ranks("ranks4-data", 4, ("1:data",), 1, WORKERS),
    # fixing rank 3 alone leaves rank 1's 30 ms: the saving to predict is the difference
    _ranks("ranks4-two-sleep", 4, ("3:sleep:100", "1:sleep:30"), 3, IN_BLOCK_1),
    _ranks("ranks4-two-mixed", 4, ("2:data:60", "1:sleep:30"), 2, WORKERS),
    Scenario(
        "gpu-launch-bound",
        "synthetic",
        "300 tiny kernels a step, 12 us of host each",
        ids=("launch-bound",),
        remedy=(("CUDA graphs",), ("torch.compile",)),
        builder="launch-bound",
    ),
    Scenario(
        "gpu-host-sync",
        "synthetic",
        ".item() waits for the device, then 1.2 ms of Python",
        ids=("host-sync",),
        remedy=((".item()",),),
        builder="host-sync",
        quick=True,
    ),
    Scenario(
        "gpu-copy",
        "synthetic",
        "pageable 18 MB HtoD copy before the compute",
        ids=("copies",),
        remedy=(("pin_memory",),),
        builder="exposed-copy",
        quick=True,
    ),
    Scenario(
        "compiled-shares",
        "external",
        "compiled layer shares against eager (resnet18, transformer)",
        checker="scripts/compare_compiled_shares.py",
    ),
    Scenario(
        "watch",
        "external",
        "watch: slowdown from step 30, 60, 80, quiet and beside a CPU hog",
        checker="benchmarks/diagnosis/watch_detection.py",
    ),
)

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
