"""nan-loss from a metric's non-finite input check (scikit-learn inside a metric computation) and from a library's
NaN-in-the-first-epoch error; the same sklearn error from an estimator's fit, or about the labels, stays with the data."""

from __future__ import annotations

from tests.helpers import analyze_console

# lee-zq/VesselSeg-Pytorch#3: the validation's roc_auc_score of the network's outputs.
VESSELSEG = [
    "Traceback (most recent call last):",
    '  File "train.py", line 97, in <module>',
    "    main()",
    '  File "train.py", line 71, in main',
    "    val_log = val(val_loader,net,criterion,device)",
    '  File "D:\\Users\\zhaoyili\\project\\VesselSeg-Pytorch\\function.py", line 126, in val',
    "    ('val_auc_roc', evaluater.auc_roc())])",
    '  File "D:\\Users\\zhaoyili\\project\\VesselSeg-Pytorch\\lib\\metrics.py", line 44, in auc_roc',
    "    AUC_ROC = roc_auc_score(self.target, self.output)",
    '  File "D:\\Users\\zhaoyili\\.conda\\envs\\pytorch\\lib\\site-packages\\sklearn\\utils\\validation.py", line 63, in inner_f',
    "    return f(*args, **kwargs)",
    '  File "D:\\Users\\zhaoyili\\.conda\\envs\\pytorch\\lib\\site-packages\\sklearn\\metrics\\_ranking.py", line 524, in roc_auc_score',
    "    y_score = check_array(y_score, ensure_2d=False)",
    '  File "D:\\Users\\zhaoyili\\.conda\\envs\\pytorch\\lib\\site-packages\\sklearn\\utils\\validation.py", line 720, in check_array',
    "    _assert_all_finite(array,",
    '  File "D:\\Users\\zhaoyili\\.conda\\envs\\pytorch\\lib\\site-packages\\sklearn\\utils\\validation.py", line 103, in _assert_all_finite',
    "    raise ValueError(",
    "ValueError: Input contains NaN, infinity or a value too large for dtype('float32').",
]


def test_roc_auc_of_nan_outputs_under_sklearn_metrics_frames_is_a_nan_loss(tmp_path):
    found, _ = analyze_console(tmp_path, VESSELSEG)
    assert found[0].id == "nan-loss"
    assert found[0].evidence[0].line == len(VESSELSEG)


def test_metric_named_on_the_error_line_is_a_nan_loss(tmp_path):
    # slideflow/slideflow#140: the trainer logs the caught error of its AUC computation, nothing else.
    line = "Error encountered when generating AUC: Input contains NaN, infinity or a value too large for dtype('float32')."
    found, _ = analyze_console(tmp_path, [line])
    assert [f.id for f in found][:1] == ["nan-loss"]
    assert "metric" in found[0].summary


def test_estimator_fit_on_data_with_nan_is_no_nan_loss(tmp_path):
    # near miss pylablanche/gcForest#22: LogisticRegression.fit on a feature matrix holding NaN (the data's fault).
    found, events = analyze_console(tmp_path, ["ValueError: Input contains NaN, infinity or a value too large for dtype('float64')."])
    assert "nonfinite_metric_input" in set(events.get_column("code").cast(str).to_list())
    assert "nan-loss" not in {f.id for f in found}


def test_nan_labels_named_by_sklearn_are_no_nan_loss(tmp_path):
    # near miss: sklearn >= 1.1 names the checked input (`Input {input_name} contains NaN.`, _assert_all_finite); NaN in
    # y_true under the same roc_auc_score frames is a label of the data, not an output of the model.
    found, _ = analyze_console(tmp_path, VESSELSEG[:-1] + ["ValueError: Input y_true contains NaN."])
    assert "nan-loss" not in {f.id for f in found}


def test_gluonts_nan_in_first_epoch_is_a_nan_loss_quoted_at_the_exception(tmp_path):
    # awslabs/gluonts#519: the trainer's own error (the frame's source line quotes it too; the exception line is the event).
    lines = [
        '  File "/home/u/anaconda3/envs/gazin/lib/python3.6/site-packages/gluonts/trainer/_base.py", line 328, in __call__',
        '    "Got NaN in first epoch. Try reducing initial learning rate."',
        "gluonts.core.exception.GluonTSUserError: Got NaN in first epoch. Try reducing initial learning rate.",
    ]
    found, _ = analyze_console(tmp_path, lines)
    assert found[0].id == "nan-loss"
    assert [e.line for e in found[0].evidence] == [3]
