"""Message definitions (msg/, srv/ plus ROS 2 Humble's standard types) and the one CDR codec."""

from user.interfaces.codec import Codec, DecodeError, EncodeError, UnknownTypeError, default_codec

__all__ = ["Codec", "DecodeError", "EncodeError", "UnknownTypeError", "default_codec"]
