"""The use cases: what memlog does, behind the faces and above the stores' ports."""
