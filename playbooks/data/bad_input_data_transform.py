"""bad-input-data from Caffe's DataTransformer checks: records that do not fit the crop, the mean file or the mean values."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.data.bad_input_data import CHECK_CODES, PLAYBOOK
from forensics.playbooks.evidence import detection, events, first_message, where

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Caffe's DataTransformer (src/caffe/data_transformer.cpp; SSD's and other forks' copies) checks every record against
# transform_param before it is copied into the batch: `height <= datum_height` (an image smaller than crop_size),
# `datum_height == data_mean_.height()` / `cv_cropped_image.rows == data_mean_.height()` (a mean file of another size),
# `mean_values_.size() == 1 || mean_values_.size() == img_channels` (grayscale records under three mean values),
# `datum_channels > 0` (a record with no image). Read from the glog prefix naming the file, or from the members the
# condition names when the prefix was not pasted. [OBS weiliu89/caffe#354, #723, #751, #35 (unencoded images of another
# size); BVLC/caffe#4113, #6064; alexgkendall/caffe-posenet#20; 01org/caffe#44; chuanqi305/MobileNet-SSD#147;
# ethanhe42/channel-pruning#96; yjxiong/caffe#84]
TRANSFORMER_FILE = r"data_transformer\.cpp:\d+\] Check failed"
TRANSFORMER_MEMBERS = r"Check failed: .*\b(?:datum_(?:height|width|channels)|data_mean_|mean_values_|img_channels|cv_cropped_image)\b"


@PLAYBOOK.detector(("events",))
def detect_transform_mismatch(ctx: Context, th: dict) -> Detection | None:
    """A fatal DataTransformer check: the records of the data layer do not fit its transform."""
    ev = events(ctx, CHECK_CODES)
    if ev.height == 0:
        return None
    text = pl.col("text").fill_null("")
    ev = ev.filter(text.str.contains(TRANSFORMER_FILE) | text.str.contains(TRANSFORMER_MEMBERS))
    if ev.height == 0:
        return None
    return detection(ev, f"the data layer's records do not fit its transform{where(ev.row(0, named=True))}: {first_message(ev)}",
                     {"transform_mismatch": 1.0}, confidence=0.85)
