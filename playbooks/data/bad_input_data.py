"""bad-input-data: labels or token ids out of range, NaN/Inf in inputs."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import combine, detection, events, first_message, where
from forensics.playbooks.fields import field

from forensics.contracts.context import Context, event_count, onset_of
from forensics.contracts.model import Cause, Detection, Severity

LABEL_CODES = ("target_out_of_bounds",)
# The kernel assert of a label out of range (nll_loss / cross-entropy on GPU).
ASSERT_CODES = ("cuda_kernel_assert",)
LABEL_ASSERT = r"n_classes|t >= 0 && t < n_classes|cur_target"
# A native library's fatal check on a label bound (glog `Check failed: label < num_classes (2 vs. 2)` in Caffe's
# SSD bbox_util, `label_value < prob_.shape(…)` in SoftmaxWithLoss): a label at or past the class count.
CHECK_CODES = ("native_check_failed",)
LABEL_CHECK = r"Check failed: \(?\w*label\w*\)? <"
INDEX_CODES = ("embedding_index_out_of_range",)
# index_select / embedding lookups (token ids). IndexKernel's generic `index out of bounds` and
# scatter/gather's `idx_dim` asserts come from any indexing in the program: device-assert reports them.
INDEX_ASSERT = r"srcIndex < srcSelectDimSize"
# ... except inside a loss: there the scatter/gather index is the target (one-hot encoding, gathering the
# log-probability of the label), so an index-bound assert raised under a loss frame is a label out of range.
BOUND_ASSERT = r"indexValue >= 0 && indexValue < |idx_dim >= 0 && idx_dim < index_size|index out of bounds"
LOSS_FRAME = r'(?i)File "[^"]*loss[^"/\\]*\.py", line \d+|, in \w*loss\w*\s*$|, in \w*loss\w*\n'
TRACEBACK_CODES = ("python_traceback",)
# The asynchronous error reports a kernel assert causes (they may be printed before the assert lines).
REPORT_CODES = ("device_side_assert",)

PLAYBOOK = declare(
    Playbook(
        id="bad-input-data",
        title="Invalid input data (labels, token ids, NaN inputs)",
        category="data",
        severity=Severity.CRITICAL,
        tables=("events", "metrics"),
        explains=("device-assert", "nan-loss", "nccl-timeout", "silent-hang"),
        codes=("bbox_out_of_range", "ctc_nan_grad_samples", "ctc_no_valid_path", "cuda_kernel_assert", "device_side_assert",
               "embedding_index_out_of_range", "fp16_overflow", "image_decode_failed", "kappa_undefined", "loss_scale_min_reached",
               "native_check_failed", "nonfinite_grad_skipped", "numpy_invalid_value", "python_traceback",
               "sample_shape_mismatch", "target_out_of_bounds"),
        causes=(
            Cause("wrong_class_count", "Labels reach or exceed num_classes (or are negative, e.g. -1 padding not ignored)",
                  verify="print(labels.min(), labels.max(), num_classes) for the failing batch",
                  fix="Set num_classes to the real label count; use ignore_index=-100 for padding labels", prior=0.45),
            Cause("vocab_mismatch", "Token ids exceed the embedding size (tokenizer and model vocabulary differ)",
                  verify="print(input_ids.max(), model.get_input_embeddings().num_embeddings)",
                  fix="model.resize_token_embeddings(len(tokenizer)); load the tokenizer that matches the model", prior=0.35,
                  playbook="tokenizer-mismatch"),
            Cause("corrupt_samples", "Corrupt samples (NaN/Inf features, broken records) in the data",
                  verify="Scan the dataset with torch.isfinite and range checks in collate_fn",
                  fix="Filter or repair the bad samples; validate in collate_fn", prior=0.2),
            Cause("infeasible_samples", "Samples the loss cannot score give NaN gradients while the batch loss stays finite "
                  "(CTC: an input, after subsampling, shorter than its transcript)",
                  verify="Compare each utterance's subsampled frame count with its token count; torch.autograd.set_detect_anomaly(True)",
                  fix="Drop utterances too short for their transcripts; ESPnet: --ctc_conf ignore_nan_grad=true "
                      "(CTCLoss(zero_infinity=True) in plain PyTorch)", prior=0.15),
            Cause("targets_outside_loss_range", "Targets outside the range the loss assumes (class ids 0..K-1 fed to a binary/sigmoid "
                  "cross-entropy, targets not in [0, 1] or not a distribution): the loss goes below zero and the accuracy stays put",
                  verify="print(y.min(), y.max()) against the loss: binary_crossentropy wants 0/1, categorical one-hot rows",
                  fix="Match the loss to the labels (sparse categorical cross-entropy with K outputs for class ids, or one-hot/0-1 targets)",
                  prior=0.1),
            Cause("uneven_sample_shapes", "The dataset yields samples of different shapes (images of other sizes or orientations, "
                  "variable-length sequences), so the DataLoader cannot stack them into one batch",
                  verify="Print the shape of each sample of the failing batch (dataset[i] for its indices)",
                  fix="Resize/crop or pad every sample to one shape in the transform, or pad in a custom collate_fn", prior=0.15),
            Cause("annotations_outside_image", "Bounding-box annotations outside their image (coordinates past the width/height, "
                  "boxes of another image size, or x_max <= x_min)",
                  verify="Check every box against its own image's width and height before augmentation",
                  fix="Correct or clip the bad annotations (BboxParams(clip=True) in recent albumentations); drop empty boxes",
                  prior=0.15),
            Cause("single_class_labels", "Every label is the same class (a path or folder pattern that gives all samples one label, "
                  "one class folder found), so a constant prediction is right on every sample",
                  verify="Count the labels the input pipeline yields per class (np.unique(labels, return_counts=True))",
                  fix="Fix the label assignment (path separators, folder names, the label column) so every class appears",
                  prior=0.1),
            Cause("label_scheme_mismatch", "Sequence labels not in the tag scheme the span metric decodes (IOB1 `I-XXX` starts with no "
                  "`B-XXX`, BIOES data read as BIO, a tag column in the wrong place), so almost no gold entity is found",
                  verify="Count the B-/S- tags in the evaluation file and compare with the entities it should hold",
                  fix="Convert the data to the configured scheme (IOB1 -> BIO/BIOES) or set the tag scheme the data uses",
                  prior=0.1),
            Cause("transform_mismatch", "The samples do not fit the data layer's transform: images smaller than the crop or of "
                  "another size than the mean file, another channel count than the mean values (grayscale records under "
                  "three mean values), records with no image data",
                  verify="Print the size and channel count of a few records of the failing split (the test set too) against "
                         "crop_size, the mean file's shape and the number of mean_value entries",
                  fix="Rebuild the records at the size and colour the net expects (encoded, resized), or set crop_size, "
                      "mean_file/mean_value to match the data", prior=0.1),
        ),
        verify="Validate each batch in collate_fn: label range, token id range, torch.isfinite",
        fix="Fix the class count or vocabulary; filter corrupt samples",
        thresholds={
            "min_skipped_updates": Threshold(3, "updates a trainer skipped for a NaN gradient norm (with a finite loss) that show bad samples", "ours; one skipped step is a one-off"),
            "entity_min_sentences": Threshold(100, "sentences an evaluation must decode before its gold entity count is judged", "ours"),
            "entity_per_sentence_below": Threshold(0.01, "gold entities per evaluated sentence below which the labels decode to (almost) no entity: fewer than one per hundred sentences", "ours; jiesutd/NCRFpp#5 (4 gold entities over 3488 dev sentences of IOB1 data), #82 (0 on its test file); labelled NER sets hold 0.5-2 per sentence"),
            "perfect_points": Threshold(3, "logged points, from the first, at which a split's accuracy is 1 with its loss at float-precision zero", "ours"),
            "perfect_loss_below": Threshold(1e-6, "a classification loss at or below this (and above 0, so printed in full) is zero to float precision", "ours"),
            "negative_loss_points": Threshold(3, "logged lines with a loss below zero beside an accuracy that show targets outside the loss's range", "ours; one negative line may be a likelihood objective"),
            "negative_loss_below": Threshold(-1e-3, "a loss below this is negative (above it, rounding of a loss at zero)", "ours"),
            "negative_loss_acc_rise": Threshold(0.02, "rise of the accuracy over those lines (absolute) above which the model is learning the labels", "ours"),
            "overlap_loss_below": Threshold(-1.0, "a loss below this beside a Dice/IoU above 1 shows masks outside [0, 1] (a "
                                                   "soft-Dice loss, negative by design, stays at or above -1)", "ours; -1 is -Dice at its best"),
            "negative_loss_min_acc": Threshold(0.01, "accuracy below which the printed accuracy is no classification accuracy (continuous targets)", "ours"),
        },
        doc="""\
## Symptom
`Target 10 is out of bounds`, the device assert `t >= 0 && t < n_classes`, a native check on a label bound
(glog `Check failed: label < num_classes (2 vs. 2)`), `IndexError: index out of range in self` from an
embedding (DyNet's `Out-of-bounds attempt to access index N for LookupParameter of size M`), `srcIndex < srcSelectDimSize`, reports of NaN/Inf in inputs, or updates skipped again and again for a
NaN gradient norm while the loss stays finite, or a training loss below zero on lines that also report an
accuracy (a classification objective: cross-entropy cannot be negative unless the targets lie outside its
range) for several lines while the accuracy does not rise, or a segmentation Dice/IoU above 1 beside a loss far below
zero (`Validation Dice Coeff: 1.97` after `loss: -2474.71`: masks loaded as 0-255). Samples a batch or a loss cannot take: `stack expects each
tensor to be equal size` raised under the DataLoader's collate frames (the dataset yields samples of different
shapes), albumentations' box checks (`Expected x_min for bbox … to be in the range [0.0, 1.0]`, `x_max is less than
or equal to x_min for bbox`: an annotation outside its image), TensorFlow's CTC `No valid path found.` (a label no
alignment of its input fits; its loss is infinite), numpy's `RuntimeWarning: invalid value encountered in log` raised in a
box-target encoder (`bbox_transform.py`: `np.log(gt_heights / ex_heights)`, a ground-truth box of no or negative size),
an image of the dataset PIL cannot decode (`image file is truncated (N bytes not processed)`, `cannot identify image
file …`: a file cut short or no image at all), Caffe's DataTransformer refusing a record (an image smaller than the crop,
a mean file or mean values that do not match its size or channels, a record with no image).

## Why it matters
On GPU the label error surfaces as an asynchronous device-side assert far from its cause; the fix is
in the data or the class count, not the model.

## Evidence
`events` with label-range, index-range and non-finite-input codes; a trainer skipping updates because
the gradient norm is NaN (ESPnet `The grad norm is nan. Skipping updating the model.`, its CTC
`N/M samples got nan grad`) while the logged loss stays finite: some samples in each batch give a NaN
gradient that the averaged loss does not show (with a CTC loss, the documented cause is utterances
shorter than their transcripts). The kernel's assert lines reach
stderr only when the host next synchronises, often after the `device-side assert triggered` error
they caused: the finding's onset is the earliest of the asserts and of that error in the same file,
so it explains the device-assert finding whatever the order of the lines.

## Known false positives
An `IndexError` from ordinary Python list indexing is not a data-range error; only the tensor forms above
count. A NaN gradient with a non-finite loss is nan-loss; an `inf` gradient norm skipped under fp16 loss
scaling, and NaN skips where the log shows fp16 loss scaling, are overflow, not data; fewer than 3
skipped updates are a one-off. Generic indexing asserts (IndexKernel `index out of bounds`, scatter/gather `idx_dim`) can come from
any indexing in the program, not only from the data: device-assert reports them (out-of-range cause).
Losses that may be negative by design stay quiet: a line that also logs a reward, a KL/ELBO/NLL/likelihood,
policy/value, entropy, generator/discriminator or contrastive term; only the plain training (or evaluation)
loss counts, only beside an accuracy, and only when that accuracy stays where it started (a likelihood objective
such as a residual log-likelihood loss goes below zero while its accuracy rises); an accuracy under 1% is no
classification accuracy (a regression or trading objective printing Keras' `acc`).
A Dice/IoU above 1 counts only beside at least `negative_loss_points` loss lines below `overlap_loss_below` (masks
loaded as 0-255 push both past what 0/1 targets allow); a soft-Dice loss negative by design stays at or above -1,
and a Dice above 1 beside a positive loss is an averaging bug in the evaluation, not the data.
The `stack expects each tensor to be equal size` message outside collate frames (a stack in the model's forward) is a
code error, not the data's; `No valid path found.` counts only from TensorFlow's CTC calculator (its glog prefix), and
a crash-free CTC warning is reported at medium (one bad sample each, the run goes on). A fatal check of Caffe's
DataTransformer (`data_transformer.cpp:N] Check failed: height <= datum_height`, `datum_height ==
data_mean_.height()`, `mean_values_.size() == 1 || mean_values_.size() == img_channels`, `datum_channels > 0`) counts as
samples that do not fit the transform; checks of other files (a solver's, a layer's shape check) do not.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Label-range, embedding-index and non-finite-input errors."""
    labels = pl.concat([events(ctx, LABEL_CODES), events(ctx, ASSERT_CODES, text=LABEL_ASSERT),
                        events(ctx, CHECK_CODES, text=LABEL_CHECK)], how="vertical_relaxed")
    index = pl.concat([events(ctx, INDEX_CODES), events(ctx, ASSERT_CODES, text=INDEX_ASSERT)], how="vertical_relaxed")
    labels = combine(labels, _bound_assert_in_loss(ctx))
    nan = labels.clear()
    parts = [p for p in (labels, index, nan) if p.height]
    if not parts:
        return None
    ev = combine(*parts)
    causes: dict[str, float] = {}
    if labels.height:
        causes["wrong_class_count"] = 0.9
    if index.height:
        causes["vocab_mismatch"] = 0.9
    if nan.height:
        causes["corrupt_samples"] = 0.9
    row = ev.row(0, named=True)
    what = "a label is out of range" if labels.height else "a token or gather index is out of range" if index.height else "invalid input data"
    cond = ev.with_columns(field("cond").alias("c")).get_column("c").drop_nulls()
    detail = f"assertion `{cond[0]}` failed ({event_count(ev)} report(s))" if cond.len() else first_message(ev)
    found = detection(ev, f"{what}{where(row)}: {detail}", causes, confidence=0.95)
    # The kernel's assert lines are flushed to stderr when the host next synchronises, often after the
    # `device-side assert triggered` error they caused: that error is where this failure shows first.
    reported = events(ctx, REPORT_CODES).join(ev.select("file").unique(), on="file")
    if reported.height:
        found.onset = onset_of(combine(ev, reported))
    return found


def _bound_assert_in_loss(ctx: Context) -> pl.DataFrame:
    """Index-bound kernel asserts of a file whose traceback runs through a loss (the index is a label there)."""
    asserts = events(ctx, ASSERT_CODES, text=BOUND_ASSERT)
    if asserts.height == 0:
        return asserts
    in_loss = events(ctx, TRACEBACK_CODES, text=LOSS_FRAME).select("file").unique()
    return asserts.join(in_loss, on="file", how="semi")
