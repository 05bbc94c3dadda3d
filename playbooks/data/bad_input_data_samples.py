"""bad-input-data from samples a batch or a loss cannot take: uneven shapes in collate, boxes outside the image or of no size, CTC labels no alignment fits, images PIL cannot decode."""

from __future__ import annotations

from forensics.playbooks.data.bad_input_data import PLAYBOOK
from forensics.playbooks.evidence import combine, detection, events, first_message, where, within
from forensics.playbooks.failure_signals import progress_after

from forensics.contracts.context import Context, event_count
from forensics.contracts.model import Detection, Severity

# torch.stack of different shapes; only inside the DataLoader's collate (default_collate, a repo's collate_fn, the
# fetcher's `self.collate_fn(data)`) is it the samples' shapes; a stack in the model's forward is a code error.
SHAPE_CODES = ("sample_shape_mismatch",)
COLLATE = r"(?i)collate"
# albumentations' box checks: an annotation outside its image (or with swapped corners).
BOX_CODES = ("bbox_out_of_range",)
# TensorFlow's CTC `No valid path found.`: a label no alignment of the input fits (its loss is infinite).
CTC_CODES = ("ctc_no_valid_path",)
# The message is a bare sentence; TensorFlow's glog prefix names the CTC calculator that wrote it.
CTC_SOURCE = r"ctc_loss_calculator\.(?:cc|h):\d+\]"
# PIL could not decode an image of the dataset (truncated, or no image at all): a corrupt file, whoever reads it.
IMAGE_CODES = ("image_decode_failed",)


# numpy's `invalid value` / `divide by zero` warning raised where box regression targets are encoded from the ground-truth
# boxes (py-faster-rcnn and its forks' bbox_transform.py `targets_dh = np.log(gt_heights / ex_heights)`, Deformable-ConvNets'
# bbox/bbox_transform.py, text-detection-ctpn's fast_rcnn/bbox_transform.py): the log of a ground-truth width or height
# that is zero or negative, an annotation with x_max <= x_min (endernewton/tf-faster-rcnn#107: `gt_rois[:, 1]` 81918.8
# above `gt_rois[:, 3]` 188.75; py-faster-rcnn#268, #775; Deformable-ConvNets#204 `check your own dataset bbox label`;
# text-detection-ctpn#49). The same warning elsewhere (nms.py on predicted boxes, a model's own arithmetic) says nothing
# of the data.
NUMPY_CODES = ("numpy_invalid_value",)
BOX_TARGETS = r"(?i)b(?:ounding_?)?box(?:es)?_?(?:transform|coder|encod\w*)\.py:"


@PLAYBOOK.detector(("events",))
def detect_unfit_samples(ctx: Context, th: dict) -> Detection | None:
    """Samples of uneven shapes in a batch, boxes outside their image, CTC labels longer than their input, images that
    cannot be decoded."""
    shapes = within(ctx, events(ctx, SHAPE_CODES), COLLATE)
    boxes = events(ctx, BOX_CODES)
    ctc = events(ctx, CTC_CODES, text=CTC_SOURCE)
    sizes = events(ctx, NUMPY_CODES, text=BOX_TARGETS)
    # A loader that caught the error and went on (a skip-bad-samples wrapper) lost one sample, not the run.
    images = events(ctx, IMAGE_CODES)
    images = images.filter(~progress_after(ctx, images))
    if not (shapes.height or boxes.height or ctc.height or sizes.height or images.height):
        return None
    causes: dict[str, float] = {}
    parts: list[str] = []
    if shapes.height:
        causes["uneven_sample_shapes"] = 0.9
        parts.append(f"the DataLoader could not collate a batch: the samples differ in shape ({first_message(shapes)})")
    if boxes.height:
        causes["annotations_outside_image"] = 0.9
        parts.append(f"a bounding box lies outside its image ({first_message(boxes)})")
    if ctc.height:
        causes["infeasible_samples"] = 0.9
        parts.append(f"the CTC loss found no valid alignment {event_count(ctc)} time(s): a label longer than its input "
                     "(after subsampling) gives an infinite loss")
    if sizes.height:
        causes["annotations_outside_image"] = 0.9
        parts.append(f"numpy warned while encoding box targets from the ground truth ({first_message(sizes)}): the log of a "
                     "box width or height that is zero or negative, an annotation with max <= min")
    if images.height:
        causes["corrupt_samples"] = 0.9
        parts.append(f"an image of the dataset cannot be decoded, truncated or not an image ({first_message(images)})")
    ev = combine(shapes, boxes, ctc, sizes, images)
    # A crash on a sample is as sure as its message; CTC warnings leave the run going, one bad sample each.
    severity = Severity.HIGH if shapes.height or boxes.height or sizes.height or images.height else Severity.MEDIUM
    return detection(ev, f"invalid samples{where(ev.row(0, named=True))}: " + "; ".join(parts), causes,
                     confidence=0.9 if severity == Severity.HIGH else 0.7, severity=severity,
                     facts={"uneven_shapes": shapes.height, "boxes_outside_image": boxes.height, "ctc_no_valid_path": ctc.height,
                            "box_size_warnings": sizes.height, "undecodable_images": images.height})
