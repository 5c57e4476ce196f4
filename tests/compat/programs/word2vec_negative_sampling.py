"""Udacity deep-learning-v2-pytorch, "Skip-gram Word2Vec" with negative sampling: the
subsampling of frequent words, get_target's random window and get_batches, the
SkipGramNeg model (input and output nn.Embedding initialised with ``uniform_(-1, 1)``,
noise words drawn by torch.multinomial from the unigram distribution to the 3/4
power, a float64 tensor made with torch.from_numpy), the NegativeSamplingLoss (bmm,
``sigmoid().log()``), Adam, and cosine_similarity's closest words with topk.

A made-up 300-word text stands in for text8; the embedding has 16 dimensions instead
of 300, the batch is 32 instead of 512, the subsampling threshold is 1e-2 instead of
1e-5, and the validation words come from a window of 20 (the notebook samples from 100
and 1000+100). Python's ``random`` is seeded by
train (the notebook leaves it unseeded). In the notebook forward_noise reads the
device from the global ``model``; here it reads it from ``self``, which is the same
object."""

import random
from collections import Counter

import numpy as np
import torch
from torch import nn, optim

REQUIRES = ("multinomial", "LongTensor", "Tensor.topk")

device = "cuda" if torch.cuda.is_available() else "cpu"


def create_lookup_tables(words):
    word_counts = Counter(words)
    # sorting the words from most to least frequent in text occurrence
    sorted_vocab = sorted(word_counts, key=word_counts.get, reverse=True)
    # create int_to_vocab dictionaries
    int_to_vocab = {ii: word for ii, word in enumerate(sorted_vocab)}
    vocab_to_int = {word: ii for ii, word in int_to_vocab.items()}
    return vocab_to_int, int_to_vocab


def get_target(words, idx, window_size=5):
    """Get a list of words in a window around an index."""
    R = np.random.randint(1, window_size + 1)
    start = idx - R if (idx - R) > 0 else 0
    stop = idx + R
    target_words = words[start:idx] + words[idx + 1 : stop + 1]
    return list(target_words)


def get_batches(words, batch_size, window_size=5):
    """Create a generator of word batches as a tuple (inputs, targets)"""
    n_batches = len(words) // batch_size
    # only full batches
    words = words[: n_batches * batch_size]
    for idx in range(0, len(words), batch_size):
        x, y = [], []
        batch = words[idx : idx + batch_size]
        for ii in range(len(batch)):
            batch_x = batch[ii]
            batch_y = get_target(batch, ii, window_size)
            y.extend(batch_y)
            x.extend([batch_x] * len(batch_y))
        yield x, y


def cosine_similarity(embedding, valid_size=16, valid_window=100, device="cpu"):
    """Returns the cosine similarity of validation words with words in the embedding matrix.
    Here, embedding should be a PyTorch embedding module.
    """
    # Here we're calculating the cosine similarity between some random words and
    # our embedding vectors. With the similarities, we can look at what words are
    # close to our random words.

    # sim = (a . b) / |a||b|

    embed_vectors = embedding.weight

    # magnitude of embedding vectors, |b|
    magnitudes = embed_vectors.pow(2).sum(dim=1).sqrt().unsqueeze(0)

    # pick N words from our ranges (0,window) and (1000,1000+window). lower id implies more frequent
    valid_examples = np.array(random.sample(range(valid_window), valid_size // 2))
    valid_examples = np.append(valid_examples, random.sample(range(valid_window), valid_size // 2))
    valid_examples = torch.LongTensor(valid_examples).to(device)

    valid_vectors = embedding(valid_examples)
    similarities = torch.mm(valid_vectors, embed_vectors.t()) / magnitudes

    return valid_examples, similarities


class SkipGramNeg(nn.Module):
    def __init__(self, n_vocab, n_embed, noise_dist=None):
        super().__init__()

        self.n_vocab = n_vocab
        self.n_embed = n_embed
        self.noise_dist = noise_dist

        # define embedding layers for input and output words
        self.in_embed = nn.Embedding(n_vocab, n_embed)
        self.out_embed = nn.Embedding(n_vocab, n_embed)

        # Initialize both embedding tables with uniform distribution
        self.in_embed.weight.data.uniform_(-1, 1)
        self.out_embed.weight.data.uniform_(-1, 1)

    def forward_input(self, input_words):
        input_vectors = self.in_embed(input_words)
        return input_vectors

    def forward_output(self, output_words):
        output_vectors = self.out_embed(output_words)
        return output_vectors

    def forward_noise(self, batch_size, n_samples):
        """Generate noise vectors with shape (batch_size, n_samples, n_embed)"""
        if self.noise_dist is None:
            # Sample words uniformly
            noise_dist = torch.ones(self.n_vocab)
        else:
            noise_dist = self.noise_dist

        # Sample words from our noise distribution
        noise_words = torch.multinomial(noise_dist, batch_size * n_samples, replacement=True)

        device = "cuda" if self.out_embed.weight.is_cuda else "cpu"
        noise_words = noise_words.to(device)

        noise_vectors = self.out_embed(noise_words).view(batch_size, n_samples, self.n_embed)

        return noise_vectors


class NegativeSamplingLoss(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, input_vectors, output_vectors, noise_vectors):
        batch_size, embed_size = input_vectors.shape

        # Input vectors should be a batch of column vectors
        input_vectors = input_vectors.view(batch_size, embed_size, 1)

        # Output vectors should be a batch of row vectors
        output_vectors = output_vectors.view(batch_size, 1, embed_size)

        # bmm = batch matrix multiplication
        # correct log-sigmoid loss
        out_loss = torch.bmm(output_vectors, input_vectors).sigmoid().log()
        out_loss = out_loss.squeeze()

        # incorrect log-sigmoid loss
        noise_loss = torch.bmm(noise_vectors.neg(), input_vectors).sigmoid().log()
        noise_loss = noise_loss.squeeze().sum(1)  # sum the losses over the sample of noise vectors

        # negate and sum correct and noisy log-sigmoid losses
        # return average batch loss
        return -(out_loss + noise_loss).mean()


TOPICS = [
    "the cat sat on the mat and the dog sat on the rug",
    "a king and a queen ruled the land with a wise council",
    "the river runs to the sea past the old mill and the town",
    "she reads a book while he writes a letter to the king",
]


def make_corpus(rng):
    words = []
    while len(words) < 300:
        words.extend(TOPICS[rng.integers(0, len(TOPICS))].split())
    return words[:300]


vocab_to_int, int_to_vocab = create_lookup_tables(make_corpus(np.random.default_rng(0)))
embedding_dim = 16


def noise_distribution(words):
    int_words = [vocab_to_int[word] for word in words]
    word_counts = Counter(int_words)
    total_count = len(int_words)
    freqs = {word: count / total_count for word, count in word_counts.items()}
    # get our noise distribution
    # Using word frequencies calculated earlier in the notebook
    word_freqs = np.array(sorted(freqs.values(), reverse=True))
    unigram_dist = word_freqs / word_freqs.sum()
    noise_dist = torch.from_numpy(unigram_dist ** (0.75) / np.sum(unigram_dist ** (0.75)))
    return noise_dist


def make_models():
    words = make_corpus(np.random.default_rng(0))
    model = SkipGramNeg(len(vocab_to_int), embedding_dim, noise_dist=noise_distribution(words)).to(
        device
    )
    return {"model": model}


def make_data(rng):
    return make_corpus(rng)


def train(models, data, steps):
    model = models["model"]
    random.seed(0)
    np.random.seed(0)
    int_words = [vocab_to_int[word] for word in data]

    # subsampling
    threshold = 1e-2  # the notebook's 1e-5 would drop nearly all of 300 words
    word_counts = Counter(int_words)
    total_count = len(int_words)
    freqs = {word: count / total_count for word, count in word_counts.items()}
    p_drop = {word: 1 - np.sqrt(threshold / freqs[word]) for word in word_counts}
    # discard some frequent words, according to the subsampling equation
    # create a new list of words for training
    train_words = [word for word in int_words if random.random() < (1 - p_drop[word])]

    # using the loss that we defined
    criterion = NegativeSamplingLoss()
    optimizer = optim.Adam(model.parameters(), lr=0.003)

    print_every = 2
    steps_done = 0
    losses = []
    # train for some number of epochs
    while steps_done < steps:
        # get our input, target batches
        for input_words, target_words in get_batches(train_words, 32):
            steps_done += 1
            inputs, targets = torch.LongTensor(input_words), torch.LongTensor(target_words)
            inputs, targets = inputs.to(device), targets.to(device)

            # input, output, and noise vectors
            input_vectors = model.forward_input(inputs)
            output_vectors = model.forward_output(targets)
            noise_vectors = model.forward_noise(inputs.shape[0], 5)

            # negative sampling loss
            loss = criterion(input_vectors, output_vectors, noise_vectors)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())

            # loss stats
            if steps_done % print_every == 0:
                valid_examples, valid_similarities = cosine_similarity(
                    model.in_embed, valid_size=8, valid_window=20, device=device
                )
                _, closest_idxs = valid_similarities.topk(6)

                valid_examples, closest_idxs = valid_examples.to("cpu"), closest_idxs.to("cpu")
                for ii, valid_idx in enumerate(valid_examples):
                    closest_words = [int_to_vocab[idx.item()] for idx in closest_idxs[ii]][1:]
                    assert len(closest_words) == 5
            if steps_done >= steps:
                break
    return losses
