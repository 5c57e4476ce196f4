"""NLP From Scratch, "Classifying Names with a Character-Level RNN": the tutorial's
hand-written RNN module (i2h and i2o on the concatenated input and hidden state),
one-hot letter tensors, NLLLoss and the manual parameter update through ``p.data``.

A few names per language stand in for the names dataset."""

import string

import torch
import torch.nn as nn

REQUIRES = ("Tensor.topk",)

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)
category_lines = {
    "English": ["Smith", "Brown", "Taylor"],
    "French": ["Dubois", "Laurent", "Moreau"],
    "Italian": ["Rossi", "Romano", "Bianchi"],
}
all_categories = list(category_lines)
n_categories = len(all_categories)
n_hidden = 32
learning_rate = 0.005


def letterToIndex(letter):
    return all_letters.find(letter)


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.i2o(combined)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


def make_models():
    return {"rnn": RNN(n_letters, n_hidden, n_categories)}


def make_data(rng):
    examples = []
    for _ in range(16):
        category = all_categories[rng.integers(0, n_categories)]
        lines = category_lines[category]
        examples.append((category, lines[rng.integers(0, len(lines))]))
    return examples


def train(models, data, steps):
    rnn = models["rnn"]
    criterion = nn.NLLLoss()
    losses = []
    for step in range(steps):
        category, line = data[step % len(data)]
        category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
        line_tensor = lineToTensor(line)
        hidden = rnn.initHidden()
        rnn.zero_grad()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        losses.append(loss.item())
        guess, guess_i = categoryFromOutput(output)
        assert guess in all_categories
    return losses
