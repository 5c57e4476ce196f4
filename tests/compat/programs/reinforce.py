"""pytorch/examples "reinforcement_learning/reinforce.py": the REINFORCE policy gradient
with ``torch.distributions.Categorical`` (a softmax policy with dropout, ``m.sample()``,
``m.log_prob(action)`` saved per step, discounted returns normalised with ``std() +
eps``, the summed ``-log_prob * R`` loss, Adam).

Without gym: a deterministic corridor written here stands in for CartPole (the
observation is a fixed 4-vector per position, action 1 moves right, reward 1 for a
step to the right and 0 otherwise, 8 steps per episode); one episode is one training
step and its loss is the policy loss."""

from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

REQUIRES = ("distributions.Categorical",)

GAMMA = 0.99
EPISODE_LENGTH = 8


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)

        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


class Corridor:
    """Positions 0..n-1, each seen as a fixed 4-vector; moving right pays 1."""

    def __init__(self, observations):
        self.observations = observations
        self.position = 0

    def reset(self):
        self.position = 0
        return self.observations[self.position], {}

    def step(self, action):
        reward = 1.0 if action == 1 else 0.0
        self.position = min(
            max(self.position + (1 if action == 1 else -1), 0), len(self.observations) - 1
        )
        return self.observations[self.position], reward, False, False, {}


def make_models():
    return {"policy": Policy()}


def make_data(rng):
    return rng.standard_normal((6, 4)).astype("float32")


def train(models, data, steps):
    policy = models["policy"]
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)
    eps = np.finfo(np.float32).eps.item()
    env = Corridor(data)

    def select_action(state):
        state = torch.from_numpy(state).float().unsqueeze(0)
        probs = policy(state)
        m = Categorical(probs)
        action = m.sample()
        policy.saved_log_probs.append(m.log_prob(action))
        return action.item()

    def finish_episode():
        R = 0
        policy_loss = []
        returns = deque()
        for r in policy.rewards[::-1]:
            R = r + GAMMA * R
            returns.appendleft(R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for log_prob, R in zip(policy.saved_log_probs, returns):
            policy_loss.append(-log_prob * R)
        optimizer.zero_grad()
        policy_loss = torch.cat(policy_loss).sum()
        policy_loss.backward()
        optimizer.step()
        del policy.rewards[:]
        del policy.saved_log_probs[:]
        return policy_loss.item()

    losses = []
    for i_episode in range(steps):
        state, _ = env.reset()
        for t in range(EPISODE_LENGTH):
            action = select_action(state)
            state, reward, terminated, truncated, _ = env.step(action)
            policy.rewards.append(reward)
        losses.append(finish_episode())
    return losses
