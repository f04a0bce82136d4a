"""Check IDs against bloomguard's published filters in process.

bloomguard publishes each filter as a file ([server] publish_dir); this
module maps it read-only through libbloomguard (lib/bloomguard.h, the
daemon's own lookup, spelling and staleness rule) and answers as the
daemon's GET /exists would at that moment.  Only Answer.ABSENT may turn a
request away.

    users = bloomguard.Filter("/run/bloomguard/default.bgf", missing_ok=True)
    if users.absent(user_id):
        return not_found()
"""

import ctypes
import enum
import os

__all__ = ["Answer", "BloomguardError", "Filter", "Info", "library_version"]
__version__ = "0.1.0"


class Answer(enum.IntEnum):
    """What a lookup says (enum bloomguard_answer)."""

    NOT_READY = -1  #: no filter to ask (missing, withdrawn, unreadable): let it through
    ABSENT = 0      #: surely not in the table: the daemon's 404
    MAYBE = 1       #: maybe in the table: the daemon's 200
    DEGRADED = 2    #: absent, but the daemon cannot show it is fresh: treat as maybe


# enum bloomguard_error, by value.
_ERRORS = ("OK", "ENOENT", "EACCES", "EFORMAT", "ESTALE", "ENOMEM", "EINVAL", "EIO")
# bloomguard_open's flag.
_OPEN_MISSING_OK = 1
# An Answer by the library's value + 1: Answer(int) costs more than the lookup.
_ANSWERS = (Answer.NOT_READY, Answer.ABSENT, Answer.MAYBE, Answer.DEGRADED)


class BloomguardError(OSError):
    """bloomguard_open failed, or a handle has no filter (info)."""

    def __init__(self, code, message, path=None):
        super().__init__(message if path is None else "%s: %s" % (path, message))
        #: "ENOENT", "EACCES", "EFORMAT", "ESTALE", "ENOMEM", "EINVAL" or "EIO"
        self.code = code


class _CInfo(ctypes.Structure):
    # struct bloomguard_info, field for field.
    _fields_ = [
        ("error", ctypes.c_int),
        ("why", ctypes.c_char * 160),
        ("name", ctypes.c_char * 64),
        ("spelling", ctypes.c_char * 32),
        ("generation", ctypes.c_uint64),
        ("layers", ctypes.c_uint),
        ("target_fpp", ctypes.c_double),
        ("horizon_age", ctypes.c_double),
        ("max_staleness", ctypes.c_double),
        ("degraded", ctypes.c_int),
        ("saturated", ctypes.c_int),
        ("pid", ctypes.c_uint32),
    ]


class Info:
    """What a filter shows now (struct bloomguard_info)."""

    __slots__ = ("error", "why", "name", "spelling", "generation", "layers", "target_fpp",
                 "horizon_age", "max_staleness", "degraded", "saturated", "pid")

    def __init__(self, c):
        self.error = _ERRORS[c.error] if 0 <= c.error < len(_ERRORS) else "EIO"
        self.why = c.why.decode("utf-8", "replace")            #: when error: what is wrong
        self.name = c.name.decode("utf-8", "replace")          #: the filter's name
        self.spelling = c.spelling.decode("ascii", "replace")  #: the column type's rule ("text", "int8")
        self.generation = c.generation      #: counts up with each rebuild of one daemon run
        self.layers = c.layers
        self.target_fpp = c.target_fpp
        self.horizon_age = c.horizon_age    #: seconds; negative: none yet
        self.max_staleness = c.max_staleness  #: seconds; 0 = never degraded by age
        self.degraded = bool(c.degraded)
        self.saturated = bool(c.saturated)
        self.pid = c.pid                    #: the publishing daemon's process id

    def __repr__(self):
        return "Info(%s)" % ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.__slots__)


def _load():
    path = os.environ.get("BLOOMGUARD_LIBRARY")
    lib = ctypes.CDLL(path or "libbloomguard.so.0")
    lib.bloomguard_open.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.POINTER(ctypes.c_int)]
    lib.bloomguard_open.restype = ctypes.c_void_p
    # c_char_p takes bytes as they are (no copy); the length makes NULs fine.
    lib.bloomguard_lookup.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.bloomguard_lookup.restype = ctypes.c_int
    lib.bloomguard_close.argtypes = [ctypes.c_void_p]
    lib.bloomguard_close.restype = None
    lib.bloomguard_info.argtypes = [ctypes.c_void_p, ctypes.POINTER(_CInfo)]
    lib.bloomguard_info.restype = ctypes.c_int
    lib.bloomguard_strerror.argtypes = [ctypes.c_int]
    lib.bloomguard_strerror.restype = ctypes.c_char_p
    lib.bloomguard_version.argtypes = []
    lib.bloomguard_version.restype = ctypes.c_char_p
    return lib


_lib = _load()


def library_version():
    """libbloomguard's version, e.g. "0.1.0"."""
    return _lib.bloomguard_version().decode()


def _lookups(h, fn=_lib.bloomguard_lookup, answers=_ANSWERS):
    def lookup(id):
        if type(id) is not bytes:
            id = id.encode() if isinstance(id, str) else memoryview(id).tobytes()
        return answers[fn(h, id, len(id)) + 1]

    def absent(id):
        if type(id) is not bytes:
            id = id.encode() if isinstance(id, str) else memoryview(id).tobytes()
        return fn(h, id, len(id)) == 0
    lookup.__doc__ = Filter.lookup.__doc__
    absent.__doc__ = Filter.absent.__doc__
    return lookup, absent


class Filter:
    """One published filter, opened by path.

    Thread-safe: any number of threads may look up at once (the lookup
    releases the GIL and takes no lock).  close() only when no other thread
    uses it.
    """

    def __init__(self, path, missing_ok=False):
        if isinstance(path, str):
            path = os.fsencode(path)
        err = ctypes.c_int(0)
        h = _lib.bloomguard_open(path, _OPEN_MISSING_OK if missing_ok else 0, ctypes.byref(err))
        if not h:
            code = _ERRORS[err.value] if 0 <= err.value < len(_ERRORS) else "EIO"
            raise BloomguardError(code, _lib.bloomguard_strerror(err.value).decode(),
                                  os.fsdecode(path))
        self._h = ctypes.c_void_p(h)
        self.path = os.fsdecode(path)
        # The lookups as closures over the handle, shadowing the methods
        # below: no attribute lookups per call (a third of the cost over the
        # bare ctypes call).  close() replaces them.
        self.lookup, self.absent = _lookups(self._h)

    def lookup(self, id):
        """Answer for id: a str (sent as UTF-8) or bytes-like (as they are)."""
        raise ValueError("lookup on a closed bloomguard.Filter")

    def absent(self, id):
        """True only when id is surely not in the table (Answer.ABSENT)."""
        raise ValueError("lookup on a closed bloomguard.Filter")

    def info(self):
        """What the filter shows now; .error is "OK" when one is mapped."""
        if self._h is None:
            raise ValueError("info on a closed bloomguard.Filter")
        c = _CInfo()
        _lib.bloomguard_info(self._h, ctypes.byref(c))
        return Info(c)

    def close(self):
        """Unmap the file.  No lookup may be running on it in another thread."""
        h, self._h = self._h, None
        if h is not None:
            # The class's methods again, which refuse.
            del self.lookup, self.absent
            _lib.bloomguard_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # A filter dropped without close() must not leak its mapping.
        if getattr(self, "_h", None) is not None:
            self.close()

    def __repr__(self):
        return "<bloomguard.Filter %r%s>" % (self.path, " closed" if self._h is None else "")
