""" "Text classification with the torchtext library": the TextClassificationModel
(nn.EmbeddingBag in mean mode over a flat token tensor with offsets, a Linear layer,
init_weights through ``.data.uniform_``), collate_batch (labels, the concatenated token
ids and the offsets by ``cumsum``), CrossEntropyLoss, SGD with lr 5,
clip_grad_norm_(..., 0.1), StepLR(optimizer, 1.0, gamma=0.1) stepped when the validation
accuracy falls, evaluate and predict.

Without torchtext: a dozen AG_NEWS-style headlines written here, basic_english's
tokenizer as a regular expression and a hand-built vocabulary with "<unk>" as the
default index stand in for the dataset and torchtext's helpers; one batch holds the
training set (shuffle=True then does not change the loss), and the tutorial's
random_split is left out (the test set validates)."""

import re

import torch
from torch import nn
from torch.utils.data import DataLoader

REQUIRES = ("nn.EmbeddingBag", "nn.utils.clip_grad_norm_", "optim.lr_scheduler.StepLR")

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

train_iter = [
    (1, "Leaders meet in Geneva to discuss the peace talks."),
    (1, "Election results spark protests in the capital."),
    (1, "The president visits troops abroad."),
    (2, "The home team wins the cup final in extra time."),
    (2, "Star striker signs a new contract with the club."),
    (2, "Olympic sprinter breaks the world record."),
    (3, "Stocks fall as oil prices climb."),
    (3, "The bank raises interest rates again."),
    (3, "Shares of the retailer jump after strong sales."),
    (4, "New chip makes phones faster and cheaper."),
    (4, "Scientists unveil a robot that learns to walk."),
    (4, "Software update fixes a security flaw."),
]
test_iter = [
    (1, "Peace talks resume in the capital."),
    (2, "The club wins the final."),
    (3, "Oil prices and stocks climb."),
    (4, "A faster robot chip."),
]


# torchtext.data.utils.get_tokenizer("basic_english")
_patterns = [
    r"\'",
    r"\"",
    r"\.",
    r"<br \/>",
    r",",
    r"\(",
    r"\)",
    r"\!",
    r"\?",
    r"\;",
    r"\:",
    r"\s+",
]
_replacements = [" '  ", "", " . ", " ", " , ", " ( ", " ) ", " ! ", " ? ", " ", " ", " "]


def tokenizer(line):
    line = line.lower()
    for pattern, replacement in zip(_patterns, _replacements):
        line = re.sub(pattern, replacement, line)
    return line.split()


def yield_tokens(data_iter):
    for _, text in data_iter:
        yield tokenizer(text)


# torchtext.vocab.build_vocab_from_iterator(yield_tokens(train_iter), specials=["<unk>"])
class Vocab:
    def __init__(self, iterator, specials):
        counts = {}
        for tokens in iterator:
            for token in tokens:
                counts[token] = counts.get(token, 0) + 1
        ordered = sorted(counts, key=lambda token: (-counts[token], token))
        self.itos = list(specials) + [token for token in ordered if token not in specials]
        self.stoi = {token: index for index, token in enumerate(self.itos)}
        self.default_index = None

    def set_default_index(self, index):
        self.default_index = index

    def __getitem__(self, token):
        return self.stoi.get(token, self.default_index)

    def __call__(self, tokens):
        return [self[token] for token in tokens]

    def __len__(self):
        return len(self.itos)


vocab = Vocab(yield_tokens(train_iter), specials=["<unk>"])
vocab.set_default_index(vocab["<unk>"])

text_pipeline = lambda x: vocab(tokenizer(x))
label_pipeline = lambda x: int(x) - 1


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for _label, _text in batch:
        label_list.append(label_pipeline(_label))
        processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list.to(device), text_list.to(device), offsets.to(device)


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super(TextClassificationModel, self).__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


num_class = len(set([label for (label, text) in train_iter]))
vocab_size = len(vocab)
emsize = 64


def make_models():
    return {"model": TextClassificationModel(vocab_size, emsize, num_class).to(device)}


def make_data(rng):
    return train_iter, test_iter


def train(models, data, steps):
    model = models["model"]
    LR = 5  # learning rate
    BATCH_SIZE = 64  # batch size for training

    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
    total_accu = None
    train_dataset, test_dataset = data
    train_dataloader = DataLoader(
        train_dataset, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch
    )
    valid_dataloader = DataLoader(
        test_dataset, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch
    )
    losses = []

    def train_one_epoch(dataloader):
        model.train()
        total_acc, total_count = 0, 0
        for idx, (label, text, offsets) in enumerate(dataloader):
            optimizer.zero_grad()
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
            losses.append(loss.item())

    def evaluate(dataloader):
        model.eval()
        total_acc, total_count = 0, 0

        with torch.no_grad():
            for idx, (label, text, offsets) in enumerate(dataloader):
                predicted_label = model(text, offsets)
                loss = criterion(predicted_label, label)
                total_acc += (predicted_label.argmax(1) == label).sum().item()
                total_count += label.size(0)
        return total_acc / total_count

    for epoch in range(1, steps + 1):
        train_one_epoch(train_dataloader)
        accu_val = evaluate(valid_dataloader)
        if total_accu is not None and total_accu > accu_val:
            scheduler.step()
        else:
            total_accu = accu_val

    def predict(text, text_pipeline):
        with torch.no_grad():
            text = torch.tensor(text_pipeline(text))
            output = model(text, torch.tensor([0]))
            return output.argmax(1).item() + 1

    assert predict("The club signs a striker.", text_pipeline) in (1, 2, 3, 4)
    return losses


def check(losses):
    assert losses[-1] < losses[0]
