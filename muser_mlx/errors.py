"""The package's own exception types."""


class GGUFError(ValueError):
    """A GGUF file, or a tensor in it, cannot serve as a token-embedding table.

    The message names the file, the tensor and the rule that was broken.
    """
