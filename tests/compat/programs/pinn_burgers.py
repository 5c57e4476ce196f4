"""A physics-informed neural network for Burgers' equation, as the PyTorch port of
Raissi's PINNs writes it (jayroxis/PINNs, "Burgers Inference (PyTorch)"): an MLP built
from an ``OrderedDict`` of Linear and Tanh layers; ``u(x, t)`` fitted to initial and
boundary data and the residual ``u_t + u u_x - nu u_xx`` driven to zero at collocation
points, with the derivatives taken by ``torch.autograd.grad(..., grad_outputs=
torch.ones_like(u), retain_graph=True, create_graph=True)`` with respect to inputs made
by ``torch.tensor(array, requires_grad=True).float()`` (non-leaf tensors); LBFGS with
``line_search_fn="strong_wolfe"`` and a closure; then the prediction of ``u`` and
the residual at test points.

The notebook reads the exact solution from ``burgers_shock.mat``; here the training
data are the initial condition ``-sin(pi x)`` and the zero boundaries, the collocation
points are uniform instead of a Latin hypercube, and they are 40 and 100 instead of 100
and 10000; the network is 2-20-20-20-1 instead of 8 hidden layers; the model is made by
``make_models`` and handed to ``PhysicsInformedNN``; LBFGS runs at most ``steps``
iterations instead of 50000."""

# ruff: noqa: UP031  (the notebook's "layer_%d" % i)

from collections import OrderedDict

import numpy as np
import torch

REQUIRES = ("optim.LBFGS",)

# CUDA support
if torch.cuda.is_available():
    device = torch.device("cuda")
else:
    device = torch.device("cpu")


# the deep neural network
class DNN(torch.nn.Module):
    def __init__(self, layers):
        super(DNN, self).__init__()

        # parameters
        self.depth = len(layers) - 1

        # set up layer order dict
        self.activation = torch.nn.Tanh

        layer_list = list()
        for i in range(self.depth - 1):
            layer_list.append(("layer_%d" % i, torch.nn.Linear(layers[i], layers[i + 1])))
            layer_list.append(("activation_%d" % i, self.activation()))

        layer_list.append(("layer_%d" % (self.depth - 1), torch.nn.Linear(layers[-2], layers[-1])))
        layerDict = OrderedDict(layer_list)

        # deploy layers
        self.layers = torch.nn.Sequential(layerDict)

    def forward(self, x):
        out = self.layers(x)
        return out


# the physics-guided neural network
class PhysicsInformedNN:
    def __init__(self, X_u, u, X_f, dnn, lb, ub, nu, max_iter):
        # boundary conditions
        self.lb = torch.tensor(lb).float().to(device)
        self.ub = torch.tensor(ub).float().to(device)

        # data
        self.x_u = torch.tensor(X_u[:, 0:1], requires_grad=True).float().to(device)
        self.t_u = torch.tensor(X_u[:, 1:2], requires_grad=True).float().to(device)
        self.x_f = torch.tensor(X_f[:, 0:1], requires_grad=True).float().to(device)
        self.t_f = torch.tensor(X_f[:, 1:2], requires_grad=True).float().to(device)
        self.u = torch.tensor(u).float().to(device)

        self.nu = nu

        # deep neural networks
        self.dnn = dnn.to(device)

        # optimizers: using the same settings
        self.optimizer = torch.optim.LBFGS(
            self.dnn.parameters(),
            lr=1.0,
            max_iter=max_iter,
            max_eval=max_iter * 5 // 4,
            history_size=50,
            tolerance_grad=1e-5,
            tolerance_change=1.0 * np.finfo(float).eps,
            line_search_fn="strong_wolfe",  # can be "strong_wolfe"
        )

        self.iter = 0
        self.losses = []

    def net_u(self, x, t):
        u = self.dnn(torch.cat([x, t], dim=1))
        return u

    def net_f(self, x, t):
        """The pytorch autograd version of calculating residual"""
        u = self.net_u(x, t)

        u_t = torch.autograd.grad(
            u, t, grad_outputs=torch.ones_like(u), retain_graph=True, create_graph=True
        )[0]
        u_x = torch.autograd.grad(
            u, x, grad_outputs=torch.ones_like(u), retain_graph=True, create_graph=True
        )[0]
        u_xx = torch.autograd.grad(
            u_x, x, grad_outputs=torch.ones_like(u_x), retain_graph=True, create_graph=True
        )[0]

        f = u_t + u * u_x - self.nu * u_xx
        return f

    def loss_func(self):
        self.optimizer.zero_grad()

        u_pred = self.net_u(self.x_u, self.t_u)
        f_pred = self.net_f(self.x_f, self.t_f)
        loss_u = torch.mean((self.u - u_pred) ** 2)
        loss_f = torch.mean(f_pred**2)

        loss = loss_u + loss_f

        loss.backward()
        self.iter += 1
        self.losses.append(loss.item())  # the notebook prints it every 100 iterations
        return loss

    def train(self):
        self.dnn.train()

        # Backward and optimize
        self.optimizer.step(self.loss_func)

    def predict(self, X):
        x = torch.tensor(X[:, 0:1], requires_grad=True).float().to(device)
        t = torch.tensor(X[:, 1:2], requires_grad=True).float().to(device)

        self.dnn.eval()
        u = self.net_u(x, t)
        f = self.net_f(x, t)
        u = u.detach().cpu().numpy()
        f = f.detach().cpu().numpy()
        return u, f


nu = 0.01 / np.pi
layers = [2, 20, 20, 20, 1]


def make_models():
    return {"dnn": DNN(layers)}


def make_data(rng):
    lb = np.array([-1.0, 0.0])  # (x, t)
    ub = np.array([1.0, 0.99])
    x0 = rng.uniform(-1, 1, (20, 1))
    initial = np.hstack([x0, np.zeros_like(x0)])
    t_b = rng.uniform(0, 0.99, (10, 1))
    boundary = np.vstack(
        [np.hstack([-np.ones_like(t_b), t_b]), np.hstack([np.ones_like(t_b), t_b])]
    )
    X_u_train = np.vstack([initial, boundary])
    u_train = np.vstack([-np.sin(np.pi * x0), np.zeros((20, 1))])
    X_f_train = lb + (ub - lb) * rng.uniform(0, 1, (100, 2))
    X_f_train = np.vstack((X_f_train, X_u_train))
    X_star = np.stack(np.meshgrid(np.linspace(-1, 1, 11), np.linspace(0, 0.99, 5)), -1).reshape(
        -1, 2
    )
    return X_u_train, u_train, X_f_train, X_star, lb, ub


def train(models, data, steps):
    X_u_train, u_train, X_f_train, X_star, lb, ub = data
    model = PhysicsInformedNN(X_u_train, u_train, X_f_train, models["dnn"], lb, ub, nu, steps)
    model.train()
    u_pred, f_pred = model.predict(X_star)
    assert u_pred.shape == (55, 1) and f_pred.shape == (55, 1) and u_pred.dtype == np.float32
    assert np.isfinite(u_pred).all() and np.isfinite(f_pred).all()
    return model.losses[:steps]


def check(losses):
    assert losses[-1] < losses[0]
