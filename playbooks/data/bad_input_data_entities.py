"""bad-input-data from a span evaluation that decodes (almost) no gold entity from its labels: wrong tag scheme."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.data.bad_input_data import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# Per split (parsers/metric_grammars/span_f1.py): the entities decoded from the gold tags, and the sentences evaluated.
SPLITS = {"eval_": "dev", "test_": "test"}


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """An evaluation that decoded `entity_min_sentences` sentences or more and found fewer than
    `entity_per_sentence_below` gold entities per sentence in their labels. The gold count comes from the data,
    not the model: a labelled NER set holds about one entity per sentence (CoNLL-2003 dev: 5942 in 3250), so a count
    near zero means the span decoder does not recognise the tags, IOB1 data (`I-PER` opening an entity) read by a
    BIO/BIOES decoder that wants `B-` (jiesutd/NCRFpp#5: `gold_num = 4` over 3488 dev sentences, `f: -1.0000` on
    test; #82: `gold_num = 0` on the test file while dev had 6062). An untrained model's `pred_num = 0`, `f: -1`
    (NCRFpp#67, epoch 0) is no finding: its gold count is normal."""
    if not ctx.has("metrics"):
        return None
    for split in SPLITS:
        gold, sents = f"{split}gold_entities", f"{split}sentences"
        if len(M.present(ctx, (gold, sents))) < 2:
            continue
        rows = ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", names=[gold, sents])
        g = rows.filter(pl.col("name") == gold).select("file", "line", "ts", "rank", "step", pl.col("value").alias("gold"))
        # The count line sits right above its split line.
        s = rows.filter(pl.col("name") == sents).select("file", (pl.col("line") - 1).alias("line"), pl.col("value").alias("sents"))
        both = g.join(s, on=["file", "line"], maintain_order="left").filter(pl.col("sents") >= th["entity_min_sentences"])
        few = both.filter(pl.col("gold") < th["entity_per_sentence_below"] * pl.col("sents")).sort("file", "line")
        if few.height == 0:
            continue
        first = few.row(0, named=True)
        return Detection(
            summary=(f"the {SPLITS[split]} evaluation found {M.fmt(first['gold'])} gold entities in {M.fmt(first['sents'])} "
                     "sentences: the entity count comes from the data's own tags, and labelled sequences hold about one per "
                     "sentence, so the span decoder does not recognise the tag scheme (IOB1 `I-` starts read as BIO/BIOES) "
                     "and precision, recall and F1 are measured against almost nothing"),
            onset=M.onset_at(first),
            evidence=M.quote(few.head(2)),
            evidence_count=few.height,
            causes={"label_scheme_mismatch": 0.9, "corrupt_samples": 0.1},
            confidence=0.7,
            severity=Severity.MEDIUM,
            facts={"split": SPLITS[split], "gold_entities": first["gold"], "sentences": first["sents"], "evaluations": few.height},
        )
    return None
