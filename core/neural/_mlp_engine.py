"""Multi-layer perceptron engine shared by ``mlp_classifier`` and ``mlp_regressor``.

[Passerini §13], [Santini ch. 12], [da Silva Neto ch. 2].

Network (float64 throughout).  Layer ``l`` maps ``a_{l-1}`` (batch x n_{l-1}) to

    z_l = a_{l-1} W_l + b_l                      (hidden and output layers)
    z_l <- gamma_l * (z_l - mu_B) / sqrt(var_B + eps) + beta_l
                                                 (hidden layers with batch_norm; b_l omitted)
    a_l = act(z_l)                               (hidden: identity/logistic/tanh/relu)

and the output unit(s) use the canonical link of the loss:

    softmax + cross-entropy   L = mean_i [logsumexp(z_i) - z_{i,y_i}]
    sigmoid + binary CE       L = mean_i [log(1 + e^{z_i}) - y_i z_i]
    identity + squared error  L = mean_i ½ ||z_i - y_i||²

so that dL/dz_out = (f(z) - y) / B for every pair.  Penalties (as scikit-learn, per mini-batch
of total weight ``S``, weights only, never biases/BN parameters):

    + alpha / (2 S) ||W||²  (L2)      + l1 / S ||W||_1  (L1, subgradient sign(W))

Back-propagation (the notes' delta formulas [Passerini §13] are garbled; these are the correct ones and
tests check them against finite differences for every activation/loss pair):

    delta_L = (f(z_L) - y) * w / S
    dW_l = a_{l-1}^T delta_l,   db_l = sum_i delta_l
    delta_{l-1} = (delta_l W_l^T) * act'(z_{l-1})  (act' from the activation output a)
    batch norm:  dgamma = sum(d * xhat), dbeta = sum(d),
                 dz = inv_std / B * (B dxhat - sum(dxhat) - xhat * sum(dxhat * xhat)),  dxhat = d gamma

All parameters live in one flat vector (``params``) with per-layer views, so the
optimisers update everything with a handful of in-place vector operations.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from ..validation import DataError

__all__ = [
    "ACTIVATIONS",
    "SOLVERS",
    "SCHEDULES",
    "MLPNetwork",
    "make_optimizer",
    "train_network",
    "common_params",
]

ACTIVATIONS = ("identity", "logistic", "sigmoid", "tanh", "relu")
SOLVERS = ("sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam")
SCHEDULES = ("constant", "linear", "invscaling", "adaptive")
OUTPUTS = ("softmax", "sigmoid", "identity")
BN_EPS = 1e-5


def _act_name(name: str) -> str:
    return "logistic" if name == "sigmoid" else name


# ----------------------------------------------------------------------------- network
class MLPNetwork:
    """A fully connected network whose parameters are one flat float64 vector.

    ``layer_sizes`` = [n_in, h_1, ..., h_k, n_out].  ``output`` is 'softmax',
    'sigmoid' or 'identity' (with its canonical loss, see the module docstring).
    """

    def __init__(self, layer_sizes, activation="relu", output="identity", batch_norm=False,
                 bn_momentum=0.9):
        self.layer_sizes = [int(s) for s in layer_sizes]
        self.activation = _act_name(activation)
        self.output = output
        self.batch_norm = bool(batch_norm)
        self.bn_momentum = float(bn_momentum)
        self.n_layers = len(self.layer_sizes) - 1
        # flat layout: per layer W (fan_in*fan_out), then b (output layer / no BN) or gamma, beta
        self._layout = []
        off = 0
        for li in range(self.n_layers):
            fi, fo = self.layer_sizes[li], self.layer_sizes[li + 1]
            bn = self.batch_norm and li < self.n_layers - 1
            entry = {"W": (off, fi, fo)}
            off += fi * fo
            if bn:
                entry["gamma"] = off
                off += fo
                entry["beta"] = off
                off += fo
            else:
                entry["b"] = off
                off += fo
            self._layout.append(entry)
        self.n_params = off
        self.params = np.zeros(off)
        self.grad = np.zeros(off)
        # running statistics for batch-norm inference
        self.running_mean = [np.zeros(s) for s in self.layer_sizes[1:-1]] if self.batch_norm else []
        self.running_var = [np.ones(s) for s in self.layer_sizes[1:-1]] if self.batch_norm else []
        self._bind()
        self._buf_rows = 0

    # -- views -----------------------------------------------------------------------
    def _views(self, vec):
        W, b, g, be = [], [], [], []
        for e in self._layout:
            off, fi, fo = e["W"]
            W.append(vec[off : off + fi * fo].reshape(fi, fo))
            if "b" in e:
                b.append(vec[e["b"] : e["b"] + fo])
                g.append(None)
                be.append(None)
            else:
                b.append(None)
                g.append(vec[e["gamma"] : e["gamma"] + fo])
                be.append(vec[e["beta"] : e["beta"] + fo])
        return W, b, g, be

    def _bind(self):
        self.W, self.b, self.gamma, self.beta = self._views(self.params)
        self.gW, self.gb, self.ggamma, self.gbeta = self._views(self.grad)

    def weight_mask(self) -> np.ndarray:
        """Boolean mask of the flat entries that are weights (penalised), not biases/BN."""
        mask = np.zeros(self.n_params, dtype=bool)
        for e in self._layout:
            off, fi, fo = e["W"]
            mask[off : off + fi * fo] = True
        return mask

    _TRANSIENT = ("W", "b", "gamma", "beta", "gW", "gb", "ggamma", "gbeta", "_Z", "_XH", "_D", "_T",
                  "_inv_std", "grad")

    def __getstate__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in self._TRANSIENT}
        state["_buf_rows"] = 0
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.grad = np.zeros(self.n_params)
        self._bind()

    # -- initialisation ----------------------------------------------------------------
    def initialize(self, rng: np.random.Generator, init: str = "auto") -> None:
        """Glorot: U(±sqrt(6/(fan_in+fan_out))); He: U(±sqrt(6/fan_in)) (variance 2/fan_in).

        'auto' = He for relu hidden units, Glorot otherwise.  Biases and BN shifts start at 0,
        BN scales at 1.  [Passerini §13.4] gives the Glorot bound.
        """
        if init == "auto":
            init = "he" if self.activation == "relu" else "glorot"
        for li, e in enumerate(self._layout):
            _, fi, fo = e["W"]
            bound = math.sqrt(6.0 / fi) if (init == "he" and li < self.n_layers - 1) else math.sqrt(
                6.0 / (fi + fo)
            )
            self.W[li][...] = rng.uniform(-bound, bound, size=(fi, fo))
            if self.b[li] is not None:
                self.b[li][...] = 0.0
            else:
                self.gamma[li][...] = 1.0
                self.beta[li][...] = 0.0

    # -- buffers -----------------------------------------------------------------------
    def _ensure_buffers(self, rows: int) -> None:
        if self._buf_rows >= rows:
            return
        sizes = self.layer_sizes
        self._Z = [np.empty((rows, s)) for s in sizes[1:]]  # pre-activation, then activation
        self._D = [np.empty((rows, s)) for s in sizes[1:]]  # deltas
        self._T = [np.empty((rows, s)) for s in sizes[1:]]  # scratch
        self._XH = [np.empty((rows, s)) for s in sizes[1:-1]] if self.batch_norm else []
        self._inv_std = [np.empty(s) for s in sizes[1:-1]] if self.batch_norm else []
        self._buf_rows = rows

    def release_buffers(self) -> None:
        """Drop the training buffers (a fitted model only needs ``forward``)."""
        for k in ("_Z", "_XH", "_D", "_T", "_inv_std"):
            self.__dict__.pop(k, None)
        self._buf_rows = 0

    # -- activations -------------------------------------------------------------------
    def _activate(self, Z):
        act = self.activation
        if act == "relu":
            np.maximum(Z, 0.0, out=Z)
        elif act == "tanh":
            np.tanh(Z, out=Z)
        elif act == "logistic":
            expit(Z, out=Z)

    def _derivative(self, A, D, T):
        """D *= act'(z), written in terms of the activation output A."""
        act = self.activation
        if act == "relu":
            np.greater(A, 0.0, out=T)  # stored as 0./1. in a float buffer
            D *= T
        elif act == "tanh":
            np.multiply(A, A, out=T)
            np.subtract(1.0, T, out=T)
            D *= T
        elif act == "logistic":
            np.subtract(1.0, A, out=T)
            T *= A
            D *= T

    # -- inference ---------------------------------------------------------------------
    def forward(self, X: np.ndarray) -> np.ndarray:
        """Output-layer values f(z_L) in inference mode (BN uses running statistics)."""
        A = X
        last = self.n_layers - 1
        for li in range(self.n_layers):
            Z = A @ self.W[li]
            if li < last and self.batch_norm:
                scale = self.gamma[li] / np.sqrt(self.running_var[li] + BN_EPS)
                Z -= self.running_mean[li]
                Z *= scale
                Z += self.beta[li]
            else:
                Z += self.b[li]
            if li < last:
                self._activate(Z)
            A = Z
        return self._output(A)

    def _output(self, Z):
        if self.output == "softmax":
            Z -= Z.max(axis=1, keepdims=True)
            np.exp(Z, out=Z)
            Z /= Z.sum(axis=1, keepdims=True)
        elif self.output == "sigmoid":
            expit(Z, out=Z)
        return Z

    # -- training pass -----------------------------------------------------------------
    def loss_grad(self, X, Y, sw=None, *, alpha=0.0, l1=0.0, update_running=False) -> float:
        """Training-mode loss (incl. penalties) of one batch; the gradient goes to ``self.grad``.

        ``Y``: one-hot (softmax), 0/1 column (sigmoid) or targets (identity), shape (B, n_out).
        ``sw``: optional per-sample weights (B,); the batch total ``S`` normalises the loss.
        """
        B = X.shape[0]
        self._ensure_buffers(B)
        last = self.n_layers - 1
        bn = self.batch_norm
        acts = [X]
        A = X
        for li in range(self.n_layers):
            Z = self._Z[li][:B]
            np.matmul(A, self.W[li], out=Z)
            if li < last and bn:
                XH = self._XH[li][:B]
                mu = Z.mean(axis=0)
                Z -= mu
                var = np.einsum("ij,ij->j", Z, Z) / B
                inv_std = self._inv_std[li]
                np.sqrt(var + BN_EPS, out=inv_std)
                np.divide(1.0, inv_std, out=inv_std)
                Z *= inv_std
                XH[...] = Z
                Z *= self.gamma[li]
                Z += self.beta[li]
                if update_running:
                    m = self.bn_momentum
                    unbiased = var * (B / (B - 1)) if B > 1 else var
                    self.running_mean[li] *= m
                    self.running_mean[li] += (1.0 - m) * mu
                    self.running_var[li] *= m
                    self.running_var[li] += (1.0 - m) * unbiased
            else:
                Z += self.b[li]
            if li < last:
                self._activate(Z)
            acts.append(Z)
            A = Z

        # output link, loss and delta_L (in place in the output buffer)
        Zo = acts[-1]
        D = self._D[last][:B]
        S = float(B) if sw is None else float(sw.sum())
        if self.output == "softmax":
            Zo -= Zo.max(axis=1, keepdims=True)
            zy = np.einsum("ij,ij->i", Zo, Y)
            np.exp(Zo, out=Zo)
            s = Zo.sum(axis=1)
            per = np.log(s)
            per -= zy
            Zo /= s[:, None]
        elif self.output == "sigmoid":
            per = np.logaddexp(0.0, Zo[:, 0])
            per -= Y[:, 0] * Zo[:, 0]
            expit(Zo, out=Zo)
        else:
            per = None
        np.subtract(Zo, Y, out=D)
        if per is None:
            per = 0.5 * np.einsum("ij,ij->i", D, D)
        loss = float(per @ sw) / S if sw is not None else float(per.sum()) / S
        if sw is not None:
            D *= sw[:, None]
        D *= 1.0 / S

        # penalties (weights only)
        if alpha > 0.0 or l1 > 0.0:
            for W in self.W:
                wf = W.ravel()
                if alpha > 0.0:
                    loss += 0.5 * alpha * float(wf @ wf) / S
                if l1 > 0.0:
                    loss += l1 * float(np.abs(wf).sum()) / S

        # backward
        for li in range(last, -1, -1):
            Aprev = acts[li]
            if li < last and bn:
                XH = self._XH[li][:B]
                T = self._T[li][:B]
                np.sum(D, axis=0, out=self.gbeta[li])
                np.multiply(D, XH, out=T)
                np.sum(T, axis=0, out=self.ggamma[li])
                # D becomes d/dz of the pre-normalisation z = a W
                D *= self.gamma[li]  # dxhat
                sum_d = D.sum(axis=0)
                sum_dx = np.einsum("ij,ij->j", D, XH)
                D *= B
                D -= sum_d
                np.multiply(XH, sum_dx, out=T)
                D -= T
                D *= self._inv_std[li] / B
            else:
                np.sum(D, axis=0, out=self.gb[li])
            gW = self.gW[li]
            np.matmul(Aprev.T, D, out=gW)
            if alpha > 0.0:
                gW += (alpha / S) * self.W[li]
            if l1 > 0.0:
                gW += (l1 / S) * np.sign(self.W[li])
            if li > 0:
                Dp = self._D[li - 1][:B]
                np.matmul(D, self.W[li].T, out=Dp)
                self._derivative(Aprev, Dp, self._T[li - 1][:B])
                D = Dp
        return loss


# ----------------------------------------------------------------------------- optimisers
class _Optimizer:
    def __init__(self, n, p):
        self.t = 0
        self.p = p
        self.tmp = np.empty(n)


class _SGD(_Optimizer):
    """Plain SGD ([Passerini §13.2]): w <- w - eta g."""

    def step(self, params, grad, lr):
        np.multiply(grad, lr, out=self.tmp)
        params -= self.tmp


class _Momentum(_Optimizer):
    """Heavy-ball momentum ([Passerini §13.4]): v <- mu v - eta g; w <- w + v.

    Nesterov (as scikit-learn): w <- w + mu v_new - eta g.
    """

    def __init__(self, n, p, nesterov):
        super().__init__(n, p)
        self.v = np.zeros(n)
        self.nesterov = nesterov

    def step(self, params, grad, lr):
        mu = self.p["momentum"]
        v, tmp = self.v, self.tmp
        v *= mu
        np.multiply(grad, lr, out=tmp)
        v -= tmp
        if self.nesterov:
            params += mu * v
            params -= tmp
        else:
            params += v


class _Adagrad(_Optimizer):
    """AdaGrad ([Passerini §13.4]): r <- r + g²; w <- w - eta g / (sqrt(r) + eps)."""

    def __init__(self, n, p):
        super().__init__(n, p)
        self.r = np.zeros(n)

    def step(self, params, grad, lr):
        tmp = self.tmp
        np.multiply(grad, grad, out=tmp)
        self.r += tmp
        np.sqrt(self.r, out=tmp)
        tmp += self.p["epsilon"]
        np.divide(grad, tmp, out=tmp)
        tmp *= lr
        params -= tmp


class _RMSProp(_Optimizer):
    """RMSProp ([Passerini §13.4]): r <- rho r + (1-rho) g²; w <- w - eta g / sqrt(r + eps)."""

    def __init__(self, n, p):
        super().__init__(n, p)
        self.r = np.zeros(n)

    def step(self, params, grad, lr):
        rho = self.p["rho"]
        tmp = self.tmp
        np.multiply(grad, grad, out=tmp)
        tmp *= 1.0 - rho
        self.r *= rho
        self.r += tmp
        np.add(self.r, self.p["epsilon"], out=tmp)
        np.sqrt(tmp, out=tmp)
        np.divide(grad, tmp, out=tmp)
        tmp *= lr
        params -= tmp


class _Adam(_Optimizer):
    """Adam (Kingma & Ba; as scikit-learn): bias correction folded into the step size."""

    def __init__(self, n, p):
        super().__init__(n, p)
        self.m = np.zeros(n)
        self.v = np.zeros(n)

    def step(self, params, grad, lr):
        b1, b2, eps = self.p["beta_1"], self.p["beta_2"], self.p["epsilon"]
        self.t += 1
        m, v, tmp = self.m, self.v, self.tmp
        m *= b1
        np.multiply(grad, 1.0 - b1, out=tmp)
        m += tmp
        v *= b2
        np.multiply(grad, grad, out=tmp)
        tmp *= 1.0 - b2
        v += tmp
        lr_t = lr * math.sqrt(1.0 - b2**self.t) / (1.0 - b1**self.t)
        np.sqrt(v, out=tmp)
        tmp += eps
        np.divide(m, tmp, out=tmp)
        tmp *= lr_t
        params -= tmp


def make_optimizer(solver: str, n: int, p: dict) -> _Optimizer:
    """The optimiser for ``solver`` (see SOLVERS); ``p`` holds the validated hyperparameters."""
    if solver == "sgd":
        # scikit-learn's solver='sgd': momentum (default 0.9), Nesterov unless disabled;
        # momentum=0 gives plain SGD ([Passerini §13.2]).
        if p["momentum"] > 0.0:
            return _Momentum(n, p, p["nesterovs_momentum"])
        return _SGD(n, p)
    if solver == "momentum":
        return _Momentum(n, p, False)
    if solver == "nesterov":
        return _Momentum(n, p, True)
    if solver == "adagrad":
        return _Adagrad(n, p)
    if solver == "rmsprop":
        return _RMSProp(n, p)
    if solver == "adam":
        return _Adam(n, p)
    raise ValueError(solver)  # pragma: no cover - params validated


# ----------------------------------------------------------------------------- parameters
def common_params():
    """Hyperparameter specs shared by the MLP estimators (scikit-learn names where they exist)."""
    from ..params import Bool, Choice, Float, Int, ListOf, OneOf, Seed

    return {
        "hidden_layer_sizes": ListOf(Int(1, ge=1, le=10_000), [100], max_items=100,
                                     doc="units per hidden layer (at most 100 layers of 10,000 units)"),
        "activation": Choice("relu", ACTIVATIONS, doc="hidden activation ('sigmoid' = 'logistic')"),
        "solver": Choice(
            "adam", SOLVERS,
            doc="'sgd' as scikit-learn (uses momentum/nesterovs_momentum), 'momentum' heavy-ball, "
            "'nesterov', 'adagrad', 'rmsprop', 'adam'",
        ),
        "alpha": Float(1e-4, ge=0.0, le=1e12, doc="L2 penalty alpha/(2 S) ||W||² per batch (as scikit-learn)"),
        "l1": Float(0.0, ge=0.0, le=1e12, doc="L1 penalty l1/S ||W||_1 per batch"),
        "batch_size": OneOf("auto", [Choice("auto", ["auto"]), Int(200, ge=1, le=10_000_000)],
                            doc="mini-batch size; 'auto' = min(200, n_samples)"),
        "learning_rate": Choice(
            "constant", SCHEDULES,
            doc="'constant'; 'linear' decay to learning_rate_min over decay_epochs; 'invscaling' "
            "eta0/(t+1)^power_t (t = samples seen); 'adaptive' (/5 when loss stalls)",
        ),
        "learning_rate_init": Float(1e-3, gt=0.0, le=1e6),
        "learning_rate_min": Float(None, ge=0.0, le=1e6, nullable=True,
                                   doc="floor of the linear schedule (null: learning_rate_init/100)"),
        "decay_epochs": Int(None, ge=1, le=1_000_000, nullable=True,
                            doc="epochs of the linear decay (null: max_iter)"),
        "power_t": Float(0.5, ge=0.0, le=1000.0),
        "max_iter": Int(200, ge=1, le=1_000_000, doc="maximum number of epochs"),
        "shuffle": Bool(True),
        "random_state": Seed(),
        "tol": Float(1e-4, ge=0.0, le=1e6),
        "momentum": Float(0.9, ge=0.0, lt=1.0),
        "nesterovs_momentum": Bool(True),
        "rho": Float(0.9, ge=0.0, lt=1.0, doc="RMSProp decay"),
        "beta_1": Float(0.9, ge=0.0, lt=1.0),
        "beta_2": Float(0.999, ge=0.0, lt=1.0),
        "epsilon": Float(1e-8, gt=0.0, le=1e12),
        "early_stopping": Bool(False),
        "validation_fraction": Float(0.1, gt=0.0, lt=1.0),
        "n_iter_no_change": Int(10, ge=1, le=100_000),
        "init": Choice("auto", ["auto", "glorot", "he"],
                       doc="weight initialisation; 'auto' = He for relu, Glorot otherwise"),
        "batch_norm": Bool(False, doc="batch normalisation before each hidden activation"),
        "batch_norm_momentum": Float(0.9, ge=0.0, lt=1.0,
                                     doc="decay of the running mean/variance used at inference"),
    }


# ----------------------------------------------------------------------------- training loop
def _learning_rate(p, epoch: int, samples_seen: int, adaptive_lr: float) -> float:
    sched = p["learning_rate"]
    lr0 = p["learning_rate_init"]
    if sched == "constant":
        return lr0
    if sched == "linear":
        # [Passerini §13.4]: eta_t = (1 - t/tau) eta_0 + (t/tau) eta_min for t < tau, then eta_min
        tau = p["decay_epochs"] or p["max_iter"]
        lr_min = p["learning_rate_min"] if p["learning_rate_min"] is not None else lr0 / 100.0
        if epoch >= tau:
            return lr_min
        frac = epoch / tau
        return (1.0 - frac) * lr0 + frac * lr_min
    if sched == "invscaling":
        return lr0 / (samples_seen + 1) ** p["power_t"]
    return adaptive_lr


def train_network(net: MLPNetwork, X, Y, sw, p, rng, ctx, *, val=None, score_fn=None):
    """Mini-batch training with the configured optimiser, schedule and stopping rule.

    ``val`` = (X_val, y_val) when early stopping; ``score_fn(net, X_val, y_val)`` -> higher is better.
    Stopping as scikit-learn: stop after more than ``n_iter_no_change`` consecutive epochs in
    which the training loss did not fall by ``tol`` (or the validation score did not rise by
    ``tol``); with early stopping the best-scoring parameters are restored.
    Returns a dict with loss_curve, validation_scores, n_iter, best_loss, best_validation_score.
    """
    n = X.shape[0]
    bs = p["batch_size"]
    bs = min(200, n) if bs == "auto" else int(min(max(bs, 1), n))
    net._ensure_buffers(bs)
    opt = make_optimizer(p["solver"], net.n_params, p)
    alpha, l1 = p["alpha"], p["l1"]
    max_iter, tol, patience = p["max_iter"], p["tol"], p["n_iter_no_change"]
    Xs = np.empty_like(X)
    Ys = np.empty_like(Y)
    sws = None if sw is None else np.empty_like(sw)
    loss_curve, val_scores = [], []
    best_loss, best_score = np.inf, -np.inf
    best_params = None
    best_running = None
    no_improve = 0
    samples_seen = 0
    adaptive_lr = p["learning_rate_init"]
    starts = list(range(0, n, bs))
    epoch = 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for epoch in range(max_iter):
            lr = _learning_rate(p, epoch, samples_seen, adaptive_lr)
            if p["shuffle"]:
                perm = rng.permutation(n)
                np.take(X, perm, axis=0, out=Xs)
                np.take(Y, perm, axis=0, out=Ys)
                if sw is not None:
                    np.take(sw, perm, out=sws)
                Xe, Ye, swe = Xs, Ys, sws
            else:
                Xe, Ye, swe = X, Y, sw
            acc = 0.0
            for s in starts:
                e = s + bs
                xb = Xe[s:e]
                wb = None if swe is None else swe[s:e]
                bl = net.loss_grad(xb, Ye[s:e], wb, alpha=alpha, l1=l1, update_running=True)
                acc += bl * xb.shape[0]
                opt.step(net.params, net.grad, lr)
            loss = acc / n
            if not math.isfinite(loss):
                raise DataError(
                    "training diverged (non-finite loss); lower learning_rate_init or scale the inputs"
                )
            samples_seen += n
            loss_curve.append(loss)
            metrics = {"loss": loss}
            if val is not None:
                score = float(score_fn(net, *val))
                val_scores.append(score)
                metrics["validation_score"] = score
                no_improve = no_improve + 1 if score < best_score + tol else 0
                if score > best_score:
                    best_score = score
                    best_params = net.params.copy()
                    best_running = ([m.copy() for m in net.running_mean], [v.copy() for v in net.running_var])
            else:
                no_improve = no_improve + 1 if loss > best_loss - tol else 0
            best_loss = min(best_loss, loss)
            ctx.step(epoch + 1, max_iter, **metrics)
            if no_improve > patience:
                if p["learning_rate"] == "adaptive" and val is None and adaptive_lr > 1e-6:
                    adaptive_lr /= 5.0
                    no_improve = 0
                    if adaptive_lr <= 1e-6:
                        break
                    continue
                break
    if best_params is not None:
        net.params[...] = best_params
        net.running_mean, net.running_var = best_running
    return {
        "loss_curve": loss_curve,
        "validation_scores": val_scores,
        "n_iter": epoch + 1,
        "best_loss": best_loss,
        "best_validation_score": best_score if val is not None else None,
        "batch_size": bs,
    }


def validation_split(n: int, fraction: float, rng, codes=None):
    """Indices (train, val) with ``ceil(fraction * n)`` validation rows, stratified by ``codes``."""
    n_val = int(math.ceil(fraction * n))
    if n_val < 2 or n - n_val < 1:
        raise DataError(
            f"the validation set for early stopping would have {n_val} of {n} rows; increase "
            "validation_fraction or the size of the dataset"
        )
    perm = rng.permutation(n)
    if codes is None:
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])
    # stratified: order by class (random within class), take each class's share
    order = perm[np.argsort(codes[perm], kind="stable")]
    counts = np.bincount(codes)
    take = np.floor(counts * fraction + 0.5).astype(int)
    # adjust the total to n_val, largest remainders first
    diff = n_val - take.sum()
    rem = counts * fraction - take
    for c in np.argsort(-rem if diff > 0 else rem, kind="stable")[: abs(diff)]:
        take[c] += 1 if diff > 0 else -1
    take = np.clip(take, 0, counts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    val_mask = np.zeros(n, dtype=bool)
    for c in range(len(counts)):
        val_mask[order[starts[c] : starts[c] + take[c]]] = True
    return np.flatnonzero(~val_mask), np.flatnonzero(val_mask)


def fit_network(p, X, Y, sw, *, output, ctx, codes=None, score_fn=None):
    """Build, initialise and train a network for validated params ``p``.

    Returns ``(net, info)``; ``codes`` (class codes) stratify the early-stopping split.
    """
    from ..random import check_random_state

    rng = check_random_state(p["random_state"])
    sizes = [X.shape[1], *p["hidden_layer_sizes"], Y.shape[1]]
    net = MLPNetwork(sizes, p["activation"], output, p["batch_norm"], p["batch_norm_momentum"])
    net.initialize(rng, p["init"])
    val = None
    if p["early_stopping"]:
        tr, va = validation_split(X.shape[0], p["validation_fraction"], rng, codes)
        val = (X[va], Y[va] if codes is None else codes[va])
        X, Y = X[tr], Y[tr]
        sw = None if sw is None else sw[tr]
    info = train_network(net, X, Y, sw, p, rng, ctx, val=val, score_fn=score_fn)
    return net, info


def set_fitted(est, net: MLPNetwork, info: dict, n_features: int) -> None:
    """Assign the scikit-learn-style fitted attributes (called at the very end of fit)."""
    net.release_buffers()
    est.net_ = net
    est.coefs_ = [w.copy() for w in net.W]
    est.intercepts_ = [
        (b if b is not None else beta).copy() for b, beta in zip(net.b, net.beta, strict=True)
    ]
    est.loss_curve_ = list(info["loss_curve"])
    est.loss_ = est.loss_curve_[-1]
    est.best_loss_ = None if info["best_validation_score"] is not None else info["best_loss"]
    est.validation_scores_ = list(info["validation_scores"]) if info["validation_scores"] else None
    est.best_validation_score_ = info["best_validation_score"]
    est.n_iter_ = info["n_iter"]
    est.n_layers_ = net.n_layers + 1
    est.n_outputs_ = net.layer_sizes[-1]
    est.out_activation_ = {"softmax": "softmax", "sigmoid": "logistic", "identity": "identity"}[net.output]
    est.n_features_in_ = n_features
