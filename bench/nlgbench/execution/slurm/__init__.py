"""The Slurm launcher: a sweep's cells as job array tasks through submitit, watched and collected by
the parent, which alone writes the store (SQLite's locking is unreliable over NFS).

Modules by job: `options` (its settings, in a spec's `executor:` block and on the command line),
`book` (DIR/slurm/submissions.json, what was submitted), `queue` (what squeue and sacct say), `task`
(what runs on a node), `submit` (sbatch parameters, the checked batch script, submitit), `watch`
(collecting finished tasks, watching, `nlgbench collect` and `status`) and `launcher` (the sweep).
Layer: execution; imports foundations up to runs, and `nlgbench.execution.launcher_base`.
"""
