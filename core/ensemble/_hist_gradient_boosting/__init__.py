"""Histogram gradient boosting engine (laid out as scikit-learn's ``ensemble/_hist_gradient_boosting``).

- ``binning``: ``BinMapper``, features to uint8 bins (quantile edges; categories; a missing-value bin);
- ``loss``: losses with their baselines, gradients and hessians;
- ``histogram``: ``HistogramBuilder``, per-node histograms of gradients/hessians/counts and the row
  partition; it alone talks to ``worker``;
- ``worker``: ``RowWorker``, a forked process that holds and processes the second half of the rows;
- ``splitting``: ``SplitFinder`` and categorical splits on cumulative histograms;
- ``grower``: ``TreeGrower``, leaf-wise growth of one tree;
- ``predictor``: ``TreeEnsemble``, the fitted trees as flat arrays and their prediction;
- ``gradient_boosting``: the boosting loop shared by the classifier and the regressor.
"""
