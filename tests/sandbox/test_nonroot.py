"""The sandbox started by an unprivileged user: no uid drop; the network is blocked by a network
namespace inside a user namespace and by seccomp, the programs hold no capability, the file
system is read-only for them but their private directories, the host's own folders (the user's
home, the user's other files, this project) are hidden, and the escapee sweep and the limits
still hold.

The test (root) starts a Python process as a fresh uid in a mount namespace of its own where the
interpreter is reachable (this machine's Python may live under /root), then that process runs the
sandbox exactly as any user would and prints what it saw.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hybridmetric.sandbox import isolation
from hybridmetric.sandbox.worker import needed_paths

USER = 60999  # below the sandbox's own uids (61000-62999), used by nothing else

SCRIPT = r"""
import json, os, sys
from hybridmetric.sandbox import Limits, Program, Sandbox

port, abstract, victim, data = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
project = sys.argv[5]  # this project's tests, where a program could read what they hold
terminal = sys.argv[6]  # the user's terminal, where someone types
device = sys.argv[7]  # a device of the host's that the user may open (a console, a sound card)
queue_bytes = int(sys.argv[8])  # the programs' share of the user's message queue bytes
signals = int(sys.argv[9])  # ... and of the signals the user may hold queued
account = sys.argv[10]  # the account's home, under /opt, where HOME names another folder
home = os.environ["HOME"]
limits = Limits(timeout_s=3.0, memory_mb=512)
escape = '''
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
os.wait()
'''
plant = '''
import errno, glob, os
roots = glob.glob('/tmp/hybridmetric-sandbox-*')
assert roots, os.listdir('/tmp')
for root in roots:
    for name in ('cxx/vector', 'cxx/bits/stdc++.h', 'javac/HybridmetricJavac.class',
                 'js/hybridmetric_token.js'):
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            open(path, 'w').write('#error planted\\n')
        except OSError as exc:  # (JavaScript's preload: a read-only mount of the worker's)
            assert name.startswith('js/') and exc.errno == errno.EROFS, (name, exc)
    for built in glob.glob(os.path.join(root, 'cxx', '*.[go]*')):
        open(built, 'wb').write(b'planted')
'''
lock = '''
import os
for top in ('/tmp/locked', 'stays'):
    os.makedirs(top + '/in')
    open(top + '/in/f', 'w').write('x')
    os.chmod(top + '/in', 0o500)
    os.chmod(top, 0o500)
'''
queue = ("import ctypes, os\nq = ctypes.CDLL(None).mq_open(b'/hybridmetric-left-%d', %s, 0o600, "
         "None)\n")
probe = "import sys\nassert False, ('unicodedata' in sys.modules, len(sys.modules))\n"
# the private folders and the worker's are the user's: what a program may set on them (times,
# mode, extended attributes, a default ACL, inode flags) must not reach the next program
marked = ("['/tmp', '/var/tmp', '/dev/shm', '/run', '/tmp/.mqueue']"
          " + glob.glob('/tmp/hybridmetric-*')")
mark = f'''
import ctypes, errno, fcntl, glob, os
acl = bytes.fromhex('02000000' '01000000ffffffff' '04000000ffffffff' '20000000ffffffff')  # ---
for path in {marked}:
    os.utime(path, ns=(123456789, 987654321))
    if not path.startswith('/tmp/hybridmetric-'):  # (that one changed retires its worker)
        os.chmod(path, 0o1700)
    for name, value in (('user.note', b'for the next'), ('system.posix_acl_default', acl)):
        try:
            os.setxattr(path, name, value)
            raise AssertionError(path + ' took ' + name)
        except OSError as exc:
            assert exc.errno == errno.ENOTSUP, (path, name, exc)
fd = os.open('/tmp/flagged', os.O_CREAT | os.O_RDONLY)
try:
    fcntl.ioctl(fd, 0x40086602, (0x40).to_bytes(4, 'little'))  # FS_IOC_SETFLAGS, no-dump
    raise AssertionError('flags set')
except OSError as exc:
    assert exc.errno == errno.ENOTTY, exc
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(469, -100, b'/tmp/flagged', None, 0, 0) == -1  # file_setattr
assert ctypes.get_errno() == errno.ENOSYS, ctypes.get_errno()
'''
reads_marks = f'''
import glob, os
for path in {marked}:
    status = os.lstat(path)
    assert (status.st_atime_ns, status.st_mtime_ns) != (123456789, 987654321), path
    assert path.startswith('/tmp/hybridmetric-') or status.st_mode & 0o7777 == 0o1777, path
    assert os.listxattr(path) == [], path
os.makedirs('/tmp/made/inner')
open('/tmp/made/inner/f', 'w').write('x')
'''
# programs share the uid of their fork server: its scheduling and I/O priority, which later
# programs would inherit, they may change (the worker is then replaced), their own too; nor may
# they take all the user's inotify instances
schedules = '''
import ctypes, os
os.sched_setscheduler(1, os.SCHED_BATCH, os.sched_param(0))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(251, 1, 1, 3 << 13) == 0  # ioprio_set: the idle class
os.sched_setscheduler(os.getpid(), os.SCHED_IDLE, os.sched_param(0))  # its own, by its pid
held = []
while len(held) < 1000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    held.append(fd)
total = int(open('/proc/sys/fs/inotify/max_user_instances').read())
assert 1 <= len(held) <= max(1, total // 4), (len(held), total)  # (a quarter: one worker)
'''
after_schedule = ("import ctypes, os\nassert os.sched_getscheduler(0) == os.SCHED_OTHER\n"
                  "assert ctypes.CDLL(None).syscall(252, 1, 0) == 0\n"
                  "assert os.sched_getscheduler(1) == os.SCHED_OTHER\n")
#: ... or only its time slice (sched_setattr, Linux 6.12: 0.1 ms), which the programs it forks
#: inherit (red team, without root)
slices = '''
import ctypes, os, struct
attributes = bytearray(56)
struct.pack_into('=IIQiIQ', attributes, 0, 56, os.SCHED_OTHER, 0, 0, 0, 100000)
assert ctypes.CDLL(None, use_errno=True).syscall(314, 1, bytes(attributes), 0) == 0
'''
after_slice = '''
import ctypes
attributes = ctypes.create_string_buffer(56)
assert ctypes.CDLL(None).syscall(315, 0, attributes, 56, 0) == 0
assert attributes.raw[24:32] != (100000).to_bytes(8, 'little')
'''
js_rewrite = (
    "function add(a, b) { return a + b; }\n{\n  const fs = require('fs');\n"
    "  fs.writeFileSync(Object.keys(require.cache)[0], `\n"
    "    const session = new (require('inspector').Session)();\n"
    "    session.connectToMainThread();\n"
    "    session.post('Runtime.terminateExecution', () => session.disconnect());\n  `);\n"
    "  Promise.resolve().then(() => {\n    const end = Date.now() + 2000;\n"
    "    while (Date.now() < end) {}\n  });\n"
    "  new (require('worker_threads').Worker)('', { eval: true });\n}\n"
    "const assert = require('node:assert');\n"
    "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n")
stdcxx = "#include <bits/stdc++.h>\nint main() { std::vector<int> v{1}; assert(v.size() == 1); }\n"
programs = {
    "passes": ("python", "assert sorted([3, 1, 2]) == [1, 2, 3]\n"),
    "fails": ("python", "assert 1 + 1 == 3\n"),
    "exit_early": ("python", "import os\nos._exit(0)\nassert False\n"),
    "loops": ("python", "while True:\n    pass\n"),
    "memory": ("python", "x = bytearray(4 * 1024**3)\n"),
    # shared memory, which RLIMIT_DATA does not count (and no memory cgroup here): held by the
    # address-space limit
    "shared_memory": ("python", "import mmap\nm = mmap.mmap(-1, 3 << 30)\n"
                                "for i in range(0, 3 << 30, 4096):\n    m[i] = 1\n"),
    "memory_files": ("python", "import mmap, os\nkeep = []\nfor _ in range(60):\n"
                               "    fd = os.memfd_create('x')\n    os.ftruncate(fd, 50 << 20)\n"
                               "    keep.append(mmap.mmap(fd, 50 << 20))\n    os.close(fd)\n"),
    # ... nor secret ones (memfd_secret), whose pages are locked in memory too
    "secret_memory": ("python", "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                "assert libc.syscall(447, 0) == -1\n"
                                "assert ctypes.get_errno() == errno.ENOSYS, ctypes.get_errno()\n"),
    "cpp_shared_memory": ("cpp", "#include <sys/mman.h>\nint main() {\n"
                                 "  unsigned long n = 3ul << 30;\n  char *p = (char *)mmap(0, n, "
                                 "PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);\n"
                                 "  if (p == MAP_FAILED) return 1;\n"
                                 "  for (unsigned long i = 0; i < n; i += 4096) p[i] = 1;\n}\n"),
    # System V segments hold memory that no process maps: capped, or (where the kernel does not
    # let the worker set its IPC namespace's limit) none made
    "shared_segments": ("python", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                  "libc.shmat.restype = ctypes.c_void_p\nfor k in range(30):\n"
                                  "    i = libc.shmget(0, 50 << 20, 0o1600)\n"
                                  "    assert i >= 0, f'segment {k}: errno {ctypes.get_errno()}'\n"
                                  "    p = libc.shmat(i, None, 0)\n"
                                  "    ctypes.memset(p, 1, 50 << 20)\n"
                                  "    libc.shmdt(ctypes.c_void_p(p))\n"),
    # programs share the uid of the process that forks them (their namespace's init): they
    # may lower its limits, which every later program would inherit, or renice it
    "lowers_forker_limits": ("python", "import resource\nfor limit in (resource.RLIMIT_NOFILE, "
                                       "resource.RLIMIT_FSIZE, resource.RLIMIT_NPROC):\n"
                                       "    resource.prlimit(1, limit, (8, 8))\n"),
    "after_limits": ("python", "assert sum([1, 2]) == 3\n"),
    "renices_forker": ("python", "import os\nos.setpriority(os.PRIO_PROCESS, 1, 19)\n"
                                 "os.sched_setaffinity(1, {0})\n"),
    "after_renice": ("python", "import os\nassert os.getpriority(os.PRIO_PROCESS, 1) == 0\n"),
    "forked_by_init": ("python", "import os\nassert os.getppid() == 1\n"
                                 "assert open('/proc/1/cmdline', 'rb').read()[-6:] == "
                                 "b'serve\\0'\n"),
    "threads": ("python", "import threading\nts = [threading.Thread(target=sum, "
                          "args=(range(10**5),)) for _ in range(50)]\n"
                          "[t.start() for t in ts]\n[t.join() for t in ts]\n"),
    "fork_bomb": ("python", "import os\nwhile True:\n    os.fork()\n"),
    "escapes": ("python", escape),
    "secret": ("python", "import os\nassert 'HM_SECRET' not in os.environ, 'leaked'\n"),
    "connects": ("python", "import socket\nsocket.create_connection(('127.0.0.1', %d), 2)"
                           ".sendall(b'leak')\n" % port),
    "abstract_unix": ("python", "import socket\ns = socket.socket(socket.AF_UNIX)\n"
                                "s.connect('\\0' + %r)\ns.sendall(b'leak')\n" % abstract),
    # nested in the worker's user namespace, one more would give the program every capability
    "user_namespace": ("python", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                 "assert libc.unshare(0x10000000) == -1, 'made one'\n"
                                 "assert ctypes.get_errno() == 1, ctypes.get_errno()\n"),
    "capabilities": ("python", "held = [l for l in open('/proc/self/status') if l[:6] in "
                               "('CapPrm', 'CapEff', 'CapInh', 'CapAmb')]\n"
                               "assert all(int(l.split()[1], 16) == 0 for l in held), held\n"),
    "java_first": ("java", "class Problem {\n  public static void main(String[] a) {}\n}\n"),
    "kills_by_pid": ("python", "import os\nos.kill(%d, 9)\n" % victim),
    # nothing to kill: the compile server (the user's uid too) never outlives a compile
    "kills_all": ("python", "import os\nos.kill(-1, 9)\n"),
    "interrupts_worker": ("python", "import os, signal\nos.kill(1, signal.SIGINT)\n"),
    "sees": ("python", "import os\nseen = [p for p in os.listdir('/proc') if p.isdigit()]\n"
                       "assert len(seen) <= 3, seen\n"),
    "javascript": ("javascript", "const assert = require('node:assert');\n"
                                 "assert.deepEqual([1, 2].length, 2);\n"),
    "cpp": ("cpp", "#include <assert.h>\nint main() { assert(2 + 2 == 4); }\n"),
    "java": ("java", "class Problem {\n  public static void main(String[] a) {\n"
                     "    if (2 + 2 != 4) throw new AssertionError();\n  }\n}\n"),
    # the host's own folders (/home, /work, ...) are empty, read-only folders but for the paths
    # programs run on, which are read-only too
    "reads_home": ("python", f"import os\nassert not os.path.exists({home!r}), 'home seen'\n"),
    "reads_account_home": ("python", f"import os\nassert os.listdir({account!r}) == []\n"),
    "writes_home": ("python", f"open({os.path.dirname(home)!r} + '/planted', 'w').write('x')\n"),
    "reads_files": ("python", f"open({data!r} + '/public.txt').read()\n"),
    "reads_project": ("python", f"import os\nassert not os.path.exists({project!r}), 'seen'\n"),
    "writes_files": ("python", "import sys\nopen(sys.prefix + '/planted', 'w').write('x')\n"),
    # the host's terminals are out of reach (the user's own: what they type), its own work
    "opens_terminal": ("python", f"import os\nos.read(os.open({terminal!r}, os.O_RDWR), 99)\n"),
    "makes_terminal": ("python", "import os\nm, s = os.openpty()\nos.write(m, b'x\\n')\n"
                                 "assert os.read(s, 9) == b'x\\n'\n"),
    # ... as are its other devices, the user's or not (a read-only mount does not close them),
    # and the names of the user's kernel keys
    "opens_device": ("python", f"import os\nos.open({device!r}, os.O_RDWR)\n"),
    "queue_share": ("python", "import resource\nassert resource.getrlimit(resource."
                              f"RLIMIT_MSGQUEUE) == ({queue_bytes}, {queue_bytes})\n"
                              "assert resource.getrlimit(resource.RLIMIT_SIGPENDING) == "
                              f"({signals}, {signals})\n"),
    "devices": ("python", "import os\nassert sorted(os.listdir('/dev')) == ['fd', 'full', "
                          "'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', 'stdin', 'stdout', "
                          "'tty', 'urandom', 'zero'], os.listdir('/dev')\n"
                          "assert open('/proc/keys').read() == ''\n"),
    "writes_tmp": ("python", "open('/tmp/scratch', 'w').write('x')\n"),
    "tmp_is_empty": ("python", "import os\nassert os.listdir('/var/tmp') == []\n"),
    # the worker's own folder cannot move (a mount point of the worker's), where /tmp would keep
    # its number of entries (its size, which the worker checks) as it moved into a new one
    "swaps_worker": ("python", "import errno, glob, os\nos.mkdir('/tmp/evil')\n"
                               "[root] = glob.glob('/tmp/hybridmetric-sandbox-*')\n"
                               "try:\n    os.rename(root, '/tmp/evil/root')\n"
                               "    raise AssertionError('moved')\nexcept OSError as exc:\n"
                               "    assert exc.errno == errno.EBUSY, exc\n"),
    "after_swap": ("python", "import os\nassert not os.path.exists('/tmp/evil')\n"),
    # the precompiled header, the compile server and JavaScript's preload are the user's files
    # too: a program that rewrites them must not reach the next program
    "cpp_stdcxx": ("cpp", stdcxx),
    "js_before_plant": ("javascript", "require('assert').ok(true);\n"),
    "plants": ("python", plant),
    "cpp_after_plant": ("cpp", stdcxx + "// after\n"),
    "java_after_plant": ("java", "class Problem {\n  public static void main(String[] a) {}\n}\n"
                                 "// after\n"),
    "js_after_plant": ("javascript", "require('assert').ok(true);\n// after\n"),
    # ... and a program that rewrites that preload, then starts a worker thread, gets the
    # harness there all the same (compiled from the text its parent thread read first)
    "js_rewrites_its_harness": ("javascript", js_rewrite),
    "locks": ("python", lock),
    "after_locks": ("python", "import os\nassert not os.path.exists('/tmp/locked')\n"
                              "assert os.listdir('.') == ['program.py'], os.listdir('.')\n"),
    # the worker's own folder is the user's too: a program may put a FIFO where its output
    # could be read from (it is a memory file with no name), leave files there for the next,
    # or lock it
    "fifo_output": ("python", "import os\nos.mkfifo('../stdout')\nprint('hello')\n"
                              "assert not os.path.exists('/proc/self/fd/5')\n"),
    "stashes": ("python", "import glob\nfor root in glob.glob('/tmp/hybridmetric-sandbox-*'):\n"
                          "    open(root + '/stash', 'w').write('x')\n"),
    "finds_no_stash": ("python", "import glob\n"
                                 "assert glob.glob('/tmp/hybridmetric-sandbox-*/stash') == []\n"),
    "locks_worker": ("python", "import glob, os\n"
                               "for root in glob.glob('/tmp/hybridmetric-sandbox-*'):\n"
                               "    os.chmod(root, 0)\n"),
    "after_lock": ("python", "assert sum([1, 2]) == 3\n"),
    "marks_folders": ("python", mark),
    "reads_marks": ("python", reads_marks),
    "java_after_marks": ("java", "class Problem {\n  public static void main(String[] a) "
                                 "throws Exception {\n    java.nio.file.Path d = java.nio.file"
                                 ".Files.createTempDirectory(\"t\");\n    java.nio.file.Files"
                                 ".writeString(d.resolve(\"f\"), \"x\");\n  }\n}\n"),
    "schedules_forker": ("python", schedules),
    "after_schedule": ("python", after_schedule),
    "slices_forker": ("python", slices),
    "after_slice": ("python", after_slice),
    # the worker forks programs itself: what one compiles must not change it for the next
    "modules_before": ("python", probe),
    "named_character": ("python", "assert '\\N{BULLET}' == '\\u2022'\n"),
    "modules_after": ("python", probe + "# again\n"),
}
with Sandbox(workers=1) as box:
    isolation = box.isolation.as_dict()
    results = box.run([Program(language, source, limits)
                       for language, source in programs.values()])
# a POSIX message queue left for the next program, its folder locked (the IPC namespace, and so
# the queues' folder, is the user's): cleared by the same worker, which is not replaced
locks = "os.chmod('/tmp/.mqueue', 0o555)\nassert q >= 0\n"
with Sandbox(workers=1) as box:
    first = box._workers[0].process.pid
    queued = box.run([Program("python", queue % (os.getpid(), "os.O_CREAT | os.O_RDWR") + locks),
                      Program("python", queue % (os.getpid(), "os.O_RDONLY") + "assert q == -1\n")])
    queues = {"outcomes": [r.outcome for r in queued],
              "replaced": box._workers[0].process.pid != first}
def mine(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except FileNotFoundError:
        return False
left = [int(p) for p in os.listdir("/proc") if p.isdigit()
        and int(p) not in (os.getpid(), victim) and mine(p)]
temp = [name for name in os.listdir("/tmp") if name.startswith("hybridmetric")]
print(json.dumps({"uid": os.getuid(), "isolation": isolation, "left": left, "temp": temp,
                  "queues": queues,
                  "outcomes": {name: r.outcome for name, r in zip(programs, results)},
                  "errors": {name: r.error[-300:] for name, r in zip(programs, results)}}))
"""


def _as_user(passwd: str | None = None) -> None:
    """In the child: make the interpreter and this project reachable for ``USER`` (own mounts,
    which hide the host's other folders; ``/home`` holds the test user's), give it the account
    that ``passwd`` names, where given (its home under /opt, which no folder of the host's
    hides), then become it. Its ``/dev`` stays the host's, as a user has it: the sandbox's own
    must hide what is there."""
    project = str(Path(isolation.__file__).parents[2])
    isolation.private_devices = lambda: None  # (in this child alone, which execs next)
    isolation.private_mounts([*needed_paths(), project, "/home"])
    if passwd is not None and ctypes.CDLL(None, use_errno=True).mount(
            passwd.encode(), b"/etc/passwd", None, isolation.MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), f"bind-mount {passwd} on /etc/passwd")
    isolation.drop_privileges(USER)


@pytest.mark.skipif(os.getuid() != 0, reason="starting a process as another user needs root")
@pytest.mark.skipif(not os.path.isdir("/home") or not os.path.isdir("/opt"),
                    reason="the test's user home goes in /home, its account's in /opt")
def test_sandbox_run_by_an_unprivileged_user() -> None:
    home = f"/home/hybridmetric-test-{os.getpid()}"  # outside the private directories
    data = f"{home}-data"  # the user's files elsewhere
    # the account's home, where HOME names another folder (CI, cron), under a system folder
    account = f"/opt/hybridmetric-test-{os.getpid()}"
    for path, name, text in ((home, "secret.txt", "hunter2"), (data, "public.txt", "public"),
                             (account, "secret.txt", "hunter2")):
        os.mkdir(path, 0o755)
        with open(os.path.join(path, name), "w") as handle:
            handle.write(text)
        for entry in (path, os.path.join(path, name)):
            os.chown(entry, USER, USER)
    passwd = f"{data}/passwd"
    with open("/etc/passwd") as host, open(passwd, "w") as copy:
        copy.write(host.read() + f"hybridmetric-test:x:{USER}:{USER}::{account}:/bin/sh\n")
    try:
        _run_as_user(home, data, account, passwd)
    finally:
        for path in (home, data, account):
            shutil.rmtree(path)


def _run_as_user(home: str, data: str, account: str, passwd: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    abstract = f"hybridmetric-test-{os.getpid()}"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\0" + abstract)
    unix.listen()
    received: list[bytes] = []
    stop = threading.Event()

    def accept(server: socket.socket) -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            received.append(connection.recv(100) or b"(connected)")
            connection.close()

    threads = [threading.Thread(target=accept, args=(s,), daemon=True) for s in (listener, unix)]
    for thread in threads:
        thread.start()
    victim = subprocess.Popen(["sleep", "300"], preexec_fn=lambda: isolation.drop_privileges(USER))
    master, terminal = os.openpty()  # a terminal of the user's, something typed in it
    os.chown(os.ttyname(terminal), USER, -1)
    os.write(master, b"hunter2\n")
    device = f"/dev/hybridmetric-test-{os.getpid()}"  # the user's (as a console after a login)
    os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    os.chown(device, USER, -1)
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(listener.getsockname()[1]), abstract,
             str(victim.pid), data, str(Path(__file__).parent), os.ttyname(terminal), device,
             str(isolation.message_queue_share(1)),  # (this process's limits: the user's)
             str(isolation.pending_signal_share(1)), account],
            env={"PATH": os.environ["PATH"], "HM_SECRET": "hunter2", "HOME": home}, cwd="/",
            preexec_fn=lambda: _as_user(passwd), capture_output=True, text=True, timeout=300,
            check=False)
        victim_survived = victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
        os.unlink(device)
        os.close(master)
        os.close(terminal)
        stop.set()
        for thread in threads:
            thread.join()
        listener.close()
        unix.close()
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["uid"] == USER
    walls = {k: v for k, v in seen["isolation"].items() if k != "memory_cgroup"}  # host-dependent
    assert walls == {"network_namespace": True, "seccomp": True, "mount_namespace": True,
                     "uid": None, "pid_namespace": True, "read_only": True,
                     "ipc_namespace": True, "message_queues": True, "no_keyrings": True,
                     "no_user_namespaces": True}
    assert seen["outcomes"] == {
        "passes": "passed", "fails": "failed", "exit_early": "failed", "loops": "timeout",
        "memory": "memory", "shared_memory": "failed", "memory_files": "failed",
        "secret_memory": "passed",
        "cpp_shared_memory": "failed", "shared_segments": "failed", "threads": "passed",
        "lowers_forker_limits": "passed", "after_limits": "passed", "renices_forker": "passed",
        "after_renice": "passed", "forked_by_init": "passed",
        "fork_bomb": seen["outcomes"]["fork_bomb"], "escapes": "passed",
        "secret": "passed", "connects": "failed", "abstract_unix": "failed",
        "user_namespace": "passed", "capabilities": "passed", "java_first": "passed",
        "kills_by_pid": "failed", "kills_all": "failed", "interrupts_worker": "passed",
        "sees": "passed", "javascript": "passed", "cpp": "passed",
        "java": "passed", "reads_home": "passed", "reads_account_home": "passed",
        "writes_home": "failed",
        "reads_files": "failed", "reads_project": "passed", "writes_files": "failed",
        "writes_tmp": "passed", "opens_terminal": "failed", "makes_terminal": "passed",
        "opens_device": "failed", "devices": "passed", "queue_share": "passed",
        "tmp_is_empty": "passed", "swaps_worker": "passed", "after_swap": "passed",
        "cpp_stdcxx": "passed", "js_before_plant": "passed", "plants": "passed",
        "cpp_after_plant": "passed", "java_after_plant": "passed", "js_after_plant": "passed",
        "js_rewrites_its_harness": "failed",
        "locks": "passed",
        "after_locks": "passed", "fifo_output": "passed", "stashes": "passed",
        "finds_no_stash": "passed", "locks_worker": "passed",
        "after_lock": "passed", "marks_folders": "passed", "reads_marks": "passed",
        "java_after_marks": "passed", "schedules_forker": "passed", "after_schedule": "passed",
        "slices_forker": "passed", "after_slice": "passed",
        "modules_before": "failed", "named_character": "passed",
        "modules_after": "failed"}, seen["errors"]
    modules = [seen["errors"][name].splitlines()[-1] for name in ("modules_before",
                                                                  "modules_after")]
    assert modules[0] == modules[1] and "AssertionError: (False, " in modules[0], modules
    assert seen["queues"] == {"outcomes": ["passed", "passed"], "replaced": False}
    assert "Cannot allocate memory" in seen["errors"]["shared_memory"]
    # no memory files (no memory cgroup here): what is written to one counts to no limit
    assert "Function not implemented" in seen["errors"]["memory_files"]
    assert "errno 28" in seen["errors"]["shared_segments"]  # ENOSPC
    for name in ("writes_home", "writes_files"):
        assert "Read-only file system" in seen["errors"][name], seen["errors"][name]
    for name in ("reads_files", "opens_terminal", "opens_device"):
        assert "FileNotFoundError" in seen["errors"][name], seen["errors"][name]
    with open(os.path.join(data, "public.txt")) as handle:
        assert handle.read() == "public"  # the user's files are as they were
    assert os.listdir(home) == ["secret.txt"]
    assert seen["outcomes"]["fork_bomb"] in ("failed", "timeout")
    assert "PermissionError" in seen["errors"]["connects"]  # seccomp: no inet socket at all
    assert "ConnectionRefusedError" in seen["errors"]["abstract_unix"]  # another network ns
    assert received == []  # nothing reached the host's listener
    assert victim_survived  # another process of the same user, outside the sandbox
    assert "ProcessLookupError" in seen["errors"]["kills_by_pid"]
    assert "ProcessLookupError" in seen["errors"]["kills_all"]
    assert seen["left"] == []  # no process of the user survived: programs, escapees, servers
    assert seen["temp"] == []


#: In a process of ``USER``: a machine where neither a namespace nor a seccomp filter can be made
#: (``unshare``, ``setns``, ``seccomp`` and ``prctl(PR_SET_SECCOMP)`` fail with EPERM, for it and
#: everything it starts); then the sandbox without ``allow_network``, with it alone (programs
#: would run as the user with nothing read-only: refused too), and with ``allow_file_writes``.
NO_WALLS = r"""
import ctypes, errno, json
from hybridmetric.sandbox import Limits, Program, Sandbox, isolation

lib = ctypes.CDLL(isolation.SECCOMP_LIBRARY)
lib.seccomp_init.restype = ctypes.c_void_p
lib.seccomp_init.argtypes = [ctypes.c_uint32]
lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                       ctypes.c_uint, ctypes.POINTER(isolation._ArgCmp)]
lib.seccomp_load.argtypes = [ctypes.c_void_p]
ctx = lib.seccomp_init(isolation.SCMP_ACT_ALLOW)
deny = isolation.SCMP_ACT_ERRNO | errno.EPERM
for name in (b"unshare", b"setns", b"seccomp"):
    assert lib.seccomp_rule_add_array(ctx, deny, lib.seccomp_syscall_resolve_name(name), 0,
                                      None) == 0
set_seccomp = isolation._ArgCmp(0, 4, 22, 0)  # argument 0 == PR_SET_SECCOMP (SCMP_CMP_EQ)
assert lib.seccomp_rule_add_array(ctx, deny, lib.seccomp_syscall_resolve_name(b"prctl"), 1,
                                  ctypes.byref(set_seccomp)) == 0
assert ctypes.CDLL(None).prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS, as a user must
assert lib.seccomp_load(ctx) == 0
seen = {}
try:
    Sandbox(workers=1).close()
except RuntimeError as exc:
    seen["refused"] = str(exc)
try:
    Sandbox(workers=1, allow_network=True).close()
except RuntimeError as exc:
    seen["refused_files"] = str(exc)
with Sandbox(workers=1, allow_network=True, allow_file_writes=True) as box:
    seen["walls"] = box.isolation.as_dict()
    [result] = box.run([Program("python", "assert 1 + 1 == 2\n", Limits(timeout_s=5.0))])
    seen["outcome"] = result.outcome
# the scorer's default verdict cache is not used where programs may write the user's files
import contextlib, io
import pandas as pd
from hybridmetric.scorers.pass_rate import PassRate
said = io.StringIO()
with contextlib.redirect_stderr(said), PassRate(workers=1, allow_network=True,
                                                allow_file_writes=True) as scorer:
    rows = pd.DataFrame([{"task_id": "t", "candidate": "", "tests": {"cases": ["assert 1\n"]}}])
    seen["scored"] = float(scorer.score(rows)["score.pass"][0])
    seen["cached"] = scorer.sandbox.cache is not None
seen["warning"] = said.getvalue()
print(json.dumps(seen))
"""


@pytest.mark.skipif(os.getuid() != 0, reason="starting a process as another user needs root")
def test_no_network_block_is_refused_unless_allowed() -> None:
    done = subprocess.run([sys.executable, "-c", NO_WALLS], cwd="/", preexec_fn=_as_user,
                          env={"PATH": os.environ["PATH"], "HOME": "/nonexistent"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["refused"].startswith("no way to block the network works on this machine ("
                                      "user namespace: [Errno 1]"), seen["refused"]
    assert "allow_network=True (--set pass_rate.allow_network=true)" in seen["refused"]
    assert seen["refused_files"].startswith("programs would run as you, free to change your "
                                            "files"), seen["refused_files"]
    assert "allow_file_writes=True (--set pass_rate.allow_file_writes=true)" in (
        seen["refused_files"])
    assert not seen["walls"]["network_namespace"] and not seen["walls"]["seccomp"]
    assert seen["outcome"] == "passed"  # allowed explicitly: the programs run
    assert seen["scored"] == 1.0 and not seen["cached"]
    assert "could plant verdicts in the default cache" in seen["warning"], seen["warning"]


#: In a process of ``USER``: a machine where seccomp works but no user namespace can be made
#: (``clone`` and ``unshare`` with CLONE_NEWUSER fail with EPERM, as the sandbox's own filter
#: has it; Ubuntu's AppArmor default gives a namespace without capabilities), so the network is
#: blocked, and nothing made read-only: refused unless ``allow_file_writes``. A program then
#: writes in the user's home (argument 1), which it can: why the sandbox asks.
NO_USER_NAMESPACES = r"""
import ctypes, json, sys
from hybridmetric.sandbox import Limits, Program, Sandbox, isolation

assert ctypes.CDLL(None).prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS, as a user must
isolation.load_filter(deny_sockets=False)
seen = {}
try:
    Sandbox(workers=1).close()
except RuntimeError as exc:
    seen["refused"] = str(exc)
writes = f"open({sys.argv[1] + '/planted'!r}, 'w').write('x')\n"
with Sandbox(workers=1, allow_file_writes=True) as box:
    seen["walls"] = box.isolation.walls
    seen["outcomes"] = [r.outcome for r in box.run(
        [Program("python", code, Limits(timeout_s=5.0)) for code in (
            "assert 1 + 1 == 2\n", "import socket\nsocket.socket()\n", writes)])]
print(json.dumps(seen))
"""

#: In a process of ``USER``, with the network allowed: the user namespace is made all the same
#: (without a network namespace), and with it the read-only file system and the other walls.
NETWORK_ALLOWED = r"""
import json, sys
from hybridmetric.sandbox import Limits, Program, Sandbox

writes = f"open({sys.argv[1] + '/planted'!r}, 'w').write('x')\n"
with Sandbox(workers=1, allow_network=True) as box:
    walls = box.isolation.walls
    outcomes = [r.outcome for r in box.run(
        [Program("python", code, Limits(timeout_s=5.0)) for code in (
            "assert 1 + 1 == 2\n", writes)])]
print(json.dumps({"walls": walls, "outcomes": outcomes}))
"""


@pytest.mark.skipif(os.getuid() != 0, reason="starting a process as another user needs root")
@pytest.mark.skipif(not os.path.isdir("/home"), reason="the test's user home goes in /home")
def test_writable_files_are_refused_unless_allowed() -> None:
    home = f"/home/hybridmetric-test-{os.getpid()}"
    os.mkdir(home, 0o755)
    os.chown(home, USER, USER)
    try:
        seen = {}
        for name, script in (("no_userns", NO_USER_NAMESPACES), ("network", NETWORK_ALLOWED)):
            done = subprocess.run([sys.executable, "-c", script, home], cwd="/",
                                  preexec_fn=_as_user,
                                  env={"PATH": os.environ["PATH"], "HOME": home},
                                  capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            seen[name] = json.loads(done.stdout)
            planted = os.path.exists(os.path.join(home, "planted"))
            seen[name]["planted"] = planted
            if planted:
                os.unlink(os.path.join(home, "planted"))
    finally:
        shutil.rmtree(home)
    refused = seen["no_userns"]["refused"]
    assert refused.startswith("programs would run as you, free to change your files"), refused
    assert "user namespace: [Errno 1]" in refused and "allow_file_writes=True" in refused
    assert seen["no_userns"]["walls"] == "seccomp+nokeys+nouserns"
    # the network blocked by seccomp alone; the user's file written, as allowed
    assert seen["no_userns"]["outcomes"] == ["passed", "failed", "passed"]
    assert seen["no_userns"]["planted"]
    assert seen["network"]["walls"] == "mountns+pidns+rofs+ipcns+nokeys+nouserns"
    assert seen["network"]["outcomes"] == ["passed", "failed"]  # read-only
    assert not seen["network"]["planted"]
