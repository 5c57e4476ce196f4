""" "Language Modeling with nn.Transformer and torchtext": the TransformerModel
(Embedding, sinusoidal PositionalEncoding buffer, nn.TransformerEncoder with a causal
mask, Linear), CrossEntropyLoss, SGD with StepLR and gradient clipping.

A random token stream stands in for Wikitext-2; the model is small."""

import math

import torch
from torch import nn
from torch.nn import TransformerEncoder, TransformerEncoderLayer

REQUIRES = (
    "nn.TransformerEncoder",
    "nn.TransformerEncoderLayer",
    "nn.Transformer",
    "nn.utils.clip_grad_norm_",
    "Tensor.uniform_",
)

device = "cuda" if torch.cuda.is_available() else "cpu"
ntokens, emsize, d_hid, nlayers, nhead, dropout, bptt, batch_size = 40, 16, 32, 2, 2, 0.2, 6, 4


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = TransformerEncoder(encoder_layers, nlayers)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.linear.bias.data.zero_()
        self.linear.weight.data.uniform_(-initrange, initrange)

    def forward(self, src, src_mask=None):
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        if src_mask is None:
            src_mask = nn.Transformer.generate_square_subsequent_mask(len(src)).to(device)
        output = self.transformer_encoder(src, src_mask)
        output = self.linear(output)
        return output


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


def batchify(data, bsz):
    seq_len = data.size(0) // bsz
    data = data[: seq_len * bsz]
    data = data.view(bsz, seq_len).t().contiguous()
    return data.to(device)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].reshape(-1)
    return data, target


def make_models():
    return {"model": TransformerModel(ntokens, emsize, nhead, d_hid, nlayers, dropout)}


def make_data(rng):
    return rng.integers(0, ntokens, 160)


def train(models, data, steps):
    model = models["model"].to(device)
    train_data = batchify(torch.from_numpy(data), batch_size)
    criterion = nn.CrossEntropyLoss()
    lr = 5.0
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)
    model.train()
    losses = []
    for batch, i in enumerate(range(0, steps * bptt, bptt)):
        data, targets = get_batch(train_data, i)
        output = model(data)
        output_flat = output.view(-1, ntokens)
        loss = criterion(output_flat, targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        losses.append(loss.item())
    scheduler.step()
    return losses
