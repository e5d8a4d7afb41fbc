"""Built-in Python side tasks (need torch): vision model training and LLM batch inference."""
