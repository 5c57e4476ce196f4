"""pytorch/examples "time_sequence_prediction": sine waves (generate_sine_wave.py's
shifted ``np.sin`` in float64) learnt by the Sequence model (two nn.LSTMCell and a
Linear applied step by step over ``input.split(1, dim=1)``, then fed its own output
for ``future`` steps), the whole model in float64 through ``seq.double()``, MSELoss
and LBFGS(lr=0.8) with a closure, and the no_grad prediction of the test waves.

The waves are 6 of length 30 instead of 100 of length 1000, the prediction runs 10
steps ahead instead of 1000, and one LBFGS step runs (the example runs 15); the losses
are those of the closure's first calls (one LBFGS step makes up to 20)."""

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

REQUIRES = ("nn.LSTMCell", "optim.LBFGS")


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def make_models():
    seq = Sequence()
    seq.double()
    return {"seq": seq}


def make_data(rng):
    # generate_sine_wave.py
    T = 20
    L = 30
    N = 6
    x = np.empty((N, L), "int64")
    x[:] = np.array(range(L)) + rng.integers(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype("float64")
    return data


def train(models, data, steps):
    seq = models["seq"]
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    losses = []
    # begin to train
    for i in range(1):

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            losses.append(loss.item())  # the example prints it
            loss.backward()
            return loss

        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 10
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            y = pred.detach().numpy()
    assert y.shape == (3, 29 + 10) and y.dtype == np.float64 and np.isfinite(loss.item())
    return losses[:steps]


def check(losses):
    assert losses[-1] < losses[0]
