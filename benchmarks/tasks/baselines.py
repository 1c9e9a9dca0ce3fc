"""The baselines a benchmark runs as ``stage=baseline`` cells: the systems themselves live in
:mod:`downstream.baselines`, where every finetune summary computes them too (layering: downstream
never imports benchmarks); this module names them for the benchmark's own modules."""

from downstream.baselines import (class_probabilities, cross_validated_logistic, majority_baseline,  # noqa: F401
                                  tfidf_lr_baseline)
