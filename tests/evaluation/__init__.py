"""The recall evaluation: the model and the ranking measured on the held-out set (slow: it loads
the model), and the scoring it uses."""
