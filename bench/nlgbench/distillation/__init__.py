"""`nlgbench distill`: a FrugalScore-style student from any teacher metric (Kamal Eddine et al., 2022).

Modules by job: `pairs` (reading and making the training pairs), `augment` (synthetic candidates),
`holdout` (evaluation texts kept out of the pairs), `teacher` (the teacher's labels and their cache),
`shards` (resumable labelling: shards in the label cache, progress), `student` (training the
cross-encoder), `pipeline` (the whole run and the student's folder), `steplog` (the steps' log lines
and progress bars). Its command line is in `nlgbench.cli`. Layer: distillation; imports every layer
up to reporting.
"""
