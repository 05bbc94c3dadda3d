"""Playbooks: the diagnosis rules, one per id of PLAYBOOKS.md, grouped by category.

How to write one (see playbooks/memory/cuda_oom.py for a complete example):

- Declare it once in `playbooks/<category>/<id_with_underscores>.py` as
  `PLAYBOOK = declare(Playbook(id=..., title=..., category=..., severity=..., causes=(Cause(...), ...),
  verify=..., fix=..., tables=(...), explains=(...consequence ids...), codes=(...every event code any of
  its detectors reads...), thresholds={name: Threshold(default, doc, origin)}, doc=<Markdown with ## Symptom /
  ## Why it matters / ## Evidence / ## Known false positives [/ ## References]>))`. The declaration is frozen:
  every threshold and cause of the playbook is in it, whichever module's detector uses them.
- Add detectors with `@PLAYBOOK.detector(("events",))`: `fn(ctx: forensics.contracts.context.Context, th: dict)
  -> Detection | list[Detection] | None`. Read tables with polars (`ctx.events_of(*codes)`, `ctx.metric("loss")`);
  read metrics through the queries that keep only what they ask for (`metric_rows`, `metrics_select` and
  `metrics_lazy` with `names=` when only some metrics matter: a cached run reads only their rows; `metric_lines`
  for where and when lines were logged, one row per line; `metrics_lazy` collected with `engine="streaming"`
  for the rest): a big run's metrics do not fit in memory whole, so `ctx.table("metrics")` is for tests; quote rows with `forensics.contracts.context.evidence_rows`;
  name causes by their declared ids in `Detection.causes` ({cause_id: strength 0..1}); put the numbers
  of the summary in `Detection.facts`. Every number that decides must come from `th` (a threshold).
- Another module may add a detector for the same id from other evidence: import the declaring module's
  PLAYBOOK and decorate (`@cuda_oom.PLAYBOOK.detector(("gpu_procs",))`); it adds detectors, never
  thresholds or causes. The engine merges detections of one playbook into one finding.
- Each playbook needs a positive and a near-miss case folder, `sample_logs/<id>/<case>/` with its
  `expect.toml` inside. `forensics playbooks new ID --category C` writes the module and both skeletons.
"""
