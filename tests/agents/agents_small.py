"""Small agent settings shared by the agents tests."""

#: Small networks and budgets so every algorithm learns for a few steps in well under a second.
SMALL = {
    "ppo": {
        "horizon": 8,
        "minibatch_size": 32,
        "update_epochs": 2,
        "actor_hidden": [16],
        "critic_hidden": [16],
    },
    "a2c": {"horizon": 8, "actor_hidden": [16], "critic_hidden": [16]},
    "sac": {
        "batch_size": 16,
        "buffer_size": 512,
        "learning_starts": 32,
        "actor_hidden": [16, 16],
        "critic_hidden": [16],
    },
    "td3": {
        "batch_size": 16,
        "buffer_size": 512,
        "learning_starts": 32,
        "actor_hidden": [16],
        "critic_hidden": [16],
    },
    "ddpg": {
        "batch_size": 16,
        "buffer_size": 512,
        "learning_starts": 32,
        "actor_hidden": [16],
        "critic_hidden": [16],
    },
}
