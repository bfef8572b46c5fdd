"""A program ends as its own runtime ends it: what Python does after the last line (other threads
joined, atexit callbacks, the standard streams flushed), the file's coding declaration, a C++
process the program forks returning from ``main``, a JavaScript program's own top-level names,
a name for the user the program runs as.
Each verdict is checked against the runtime itself, run on the same file outside the sandbox."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hybridmetric.sandbox import (
    CRASH,
    FAILED,
    PASSED,
    SYNTAX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    Sandbox,
)

LIMITS = Limits(timeout_s=1.5, memory_mb=512)
#: For the programs that end of themselves: their time on a loaded machine is no part of it.
ROOMY = Limits(timeout_s=20.0, memory_mb=512)
#: A JavaScript program that forks itself (child_process.fork) and checks the child's exit
#: and answer.
FORKED_CHILD = ("const assert = require('node:assert');\n"
                "const { fork } = require('node:child_process');\n"
                "if (process.argv[2] === 'child') {\n"
                "  process.send(6 * 7);\n"
                "  process.disconnect();\n"
                "} else {\n"
                "  let answer;\n"
                "  fork(__filename, ['child']).on('message', (message) => { answer = message; })\n"
                "    .on('exit', (code) => { assert.strictEqual(code, 0); %s; });\n"
                "}\n")
#: A JavaScript program whose worker thread runs the first code; the second, on its message.
WORKER_THREAD = ("const assert = require('node:assert');\n"
                 "const { Worker } = require('node:worker_threads');\n"
                 "const worker = new Worker("
                 "'const { parentPort } = require(\"node:worker_threads\"); %s', { eval: true });\n"
                 "worker.on('message', (answer) => { %s; worker.terminate(); });\n")
#: A JavaScript program whose test reads what AsyncLocalStorage holds in a timer (5).
ASYNC_LOCAL_STORAGE = ("const assert = require('node:assert');\n"
                       "const { AsyncLocalStorage } = require('node:async_hooks');\n"
                       "const storage = new AsyncLocalStorage();\n"
                       "storage.run(5, () => setTimeout(() => "
                       "assert.strictEqual(storage.getStore(), %d), 10));\n")

#: A Python program whose forked children end as python ends them: an exit's own status (and
#: its text, where it is not a number), an error's text and 1, each after the child's atexit
#: callbacks.
FORKED_CHILDREN_END = """import atexit, os, sys

def child(action):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.dup2(write, 2)
        sys.stderr = open(2, 'w')
        atexit.register(sys.stderr.write, 'atexit\\n')
        action()
    os.close(write)
    with open(read) as pipe:
        said = pipe.read()
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), said

def exits(code):
    return lambda: sys.exit(code)

def raises(kind):
    def action():
        raise kind('no')
    return action

assert child(exits(3)) == (3, 'atexit\\n')
assert child(exits(None)) == (0, 'atexit\\n')
assert child(exits(True)) == (1, 'atexit\\n')
assert child(exits(-1)) == (255, 'atexit\\n')
assert child(exits('why')) == (1, 'why\\natexit\\n')
status, said = child(raises(ValueError))
assert status == 1 and said.endswith('ValueError: no\\natexit\\n'), (status, said)
status, said = child(raises(KeyboardInterrupt))
assert status == -2 and said.endswith('KeyboardInterrupt: no\\natexit\\n'), (status, said)
"""
#: A Python program whose stdout and stderr are objects of its own, one without ``closed`` and
#: one whose ``closed`` raises: python flushes both at exit, as open streams.
OWN_STREAMS = """import sys

class Capture:
    def __init__(self):
        self.text = ''
    def write(self, text):
        self.text += text
    def flush(self):
        pass

class Odd(Capture):
    @property
    def closed(self):
        raise ValueError('no closed here')

sys.stdout, sys.stderr = Capture(), Odd()
print('hello')
assert sys.stdout.text == 'hello\\n'
"""
#: A Python program's first names are python's, in its order (``__annotations__`` among them
#: up to 3.13), then the file's.
MAIN_NAMES = """import subprocess, sys
names = list(globals())
started = subprocess.run([sys.executable, '-c', 'print(list(globals()))'], capture_output=True,
                         text=True, check=True).stdout
assert names == [*eval(started), '__file__', '__cached__', 'subprocess', 'sys'], names
"""
#: A JavaScript program whose node children run where they are started: one started with the
#: program's own options, one forked into another directory, and a worker thread given its
#: options (from the working directory: once elsewhere, a program starts none, see the hostile
#: tests).
NODE_CHILDREN_ELSEWHERE = """const assert = require('node:assert');
const { fork, spawnSync } = require('node:child_process');
const { Worker } = require('node:worker_threads');
if (process.argv[2] === 'child') {
  process.send(6 * 7);
  process.disconnect();
} else {
  const run = spawnSync(process.execPath, [...process.execArgv, '-e', 'console.log(6 * 7)'],
                        { encoding: 'utf8' });
  assert.strictEqual(run.stdout.trim(), '42', run.stderr);
  let answer;
  fork(__filename, ['child'], { cwd: '/tmp' }).on('message', (message) => { answer = message; })
    .on('exit', (code) => {
      assert.strictEqual(code, 0);
      assert.strictEqual(answer, 42);
      const worker = new Worker('require("node:worker_threads").parentPort.postMessage(7)',
                                { eval: true, execArgv: process.execArgv });
      worker.on('message', (seven) => assert.strictEqual(seven, 7));
      worker.on('exit', (status) => assert.strictEqual(status, 0));
    });
}
"""

#: A Python program whose trace or profile function (``%s``) raises once its code has ended:
#: python calls no code of its own then (no thread module imported), so it exits 0.
CPP_RUNS_ITSELF = """#include <cassert>
#include <cstdlib>
#include <string>
int main(int argc, char **argv) {
  if (argc > 1) return %d;
  assert(std::system((std::string(argv[0]) + " copy").c_str()) == 0);
}
"""

BEFORE_EXIT_WORK = ("const assert = %s;\nlet once = false;\n"
                    "process.prependListener('beforeExit', () => {\n"
                    "  if (!once) { once = true; setTimeout(() => assert.ok(true), 5); }\n"
                    "});\n")

TRACE_LEFT_ON = """import sys
done = False

def hook(frame, event, arg):
    if done and event == "call":
        raise RuntimeError("called after the program ended")
    return hook

sys.%s(hook)
assert sum([1, 2]) == 3
done = True
"""
#: A profile function that fails at any call of a builtin once the program ended: python's exit
#: calls none it sees, nor may the harness (it sends the pass token there).
PROFILE_LEFT_ON = """import sys
done = False

def hook(frame, event, arg):
    if done and event == "c_call":
        raise RuntimeError(f"a builtin ({arg.__name__}) called after the program ended")

sys.setprofile(hook)
assert sum([1, 2]) == 3
done = True
"""

CASES = [
    # Python: the interpreter waits for non-daemon threads (and a ThreadPoolExecutor's workers,
    # and, through multiprocessing's atexit callback, its child processes) ...
    ("thread_still_running", "python",
     "import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()\n", TIMEOUT),
    ("executor_still_busy", "python",
     "from concurrent.futures import ThreadPoolExecutor\nimport time\n"
     "ThreadPoolExecutor(1).submit(time.sleep, 30)\n", TIMEOUT),
    ("child_process_still_running", "python",
     "import multiprocessing as mp, time\nif __name__ == '__main__':\n"
     "    mp.Process(target=time.sleep, args=(30,)).start()\n", TIMEOUT),
    ("thread_ends_soon", "python",
     "import threading, time\nthreading.Thread(target=time.sleep, args=(0.2,)).start()\n", PASSED),
    ("thread_exits_the_process", "python",
     "import threading, os\nthreading.Timer(0.1, os._exit, (1,)).start()\n", FAILED),
    ("thread_exits_the_process_with_0", "python",
     "import threading, os\nthreading.Timer(0.1, os._exit, (0,)).start()\n", PASSED),
    # a signal handler whose signal comes while a C atexit callback runs: python runs no
    # handler once its atexit callbacks ran (it failed with status 70, the harness's own)
    ("signal_handler_after_atexit", "python",
     "import atexit, signal\n\ndef alarm(*_):\n    raise AssertionError('too late')\n\n"
     "signal.signal(signal.SIGALRM, alarm)\natexit.register(sum, range(30_000_000))\n"
     "signal.setitimer(signal.ITIMER_REAL, 0.05)\n", PASSED),
    # the program's trace and profile functions, still on at its end, see none of the harness
    ("trace_function_left_on", "python", TRACE_LEFT_ON % "settrace", PASSED),
    ("profile_function_left_on", "python", TRACE_LEFT_ON % "setprofile", PASSED),
    ("profile_function_left_on_sees_no_builtin", "python", PROFILE_LEFT_ON, PASSED),
    # the module loses __file__ and __cached__ after its last line, as python's does
    ("file_name_gone_at_exit", "python",
     "import atexit, os\n__cached__\natexit.register(lambda: ('__file__' in globals() or "
     "'__cached__' in globals()) and os._exit(3))\n", PASSED),
    # the standard streams' names are python's
    ("stream_names", "python",
     "import sys\nassert [s.name for s in (sys.stdin, sys.stdout, sys.stderr)] == "
     "['<stdin>', '<stdout>', '<stderr>']\nassert sys.stderr.buffer.raw.name == '<stderr>'\n",
     PASSED),
    # python flushes stdout and stderr as the module returns, before it joins threads: a
    # thread that reads the program's own stdout through a pipe sees its last line and ends
    ("stdout_flushed_before_threads_are_joined", "python",
     "import os, threading\nr, w = os.pipe()\nos.dup2(w, 1)\nos.close(w)\nseen = []\n"
     "def reader():\n    with os.fdopen(r, 'rb') as f:\n"
     "        while b'END' not in b''.join(seen):\n            seen.append(f.read1(100))\n"
     "threading.Thread(target=reader).start()\nprint('END')\n", PASSED),
    # ... and before the module loses __file__ (a flush of the program's own that reads it)
    ("file_name_still_there_as_the_streams_are_flushed", "python",
     "import os, sys, threading\nimport __main__\nseen, done = [], threading.Event()\n"
     "class Out:\n    write = staticmethod(len)\n    def flush(self):\n"
     "        if not done.is_set():\n"
     "            seen.append(getattr(__main__, '__file__', None))\n            done.set()\n"
     "def watcher():\n    done.wait()\n    if seen[0] is None:\n        os._exit(1)\n"
     "threading.Thread(target=watcher).start()\nsys.stdout = Out()\n", PASSED),
    # a flush at exit that fails is status 120, even where a signal handler raises after it
    # (as the error's repr, in C, sends the signal)
    ("failed_flush_then_a_signal_handler_raises", "python",
     "import functools, os, signal, sys\n"
     "def late(signum, frame):\n    raise RuntimeError('handled')\n"
     "signal.signal(signal.SIGUSR1, late)\nclass Boom(OSError):\n"
     "    __repr__ = functools.partial(os.killpg, 0, signal.SIGUSR1)\nclass Out:\n"
     "    write = staticmethod(len)\n    def flush(self):\n        raise Boom('no')\n"
     "sys.stdout = Out()\n", FAILED),
    # a signal handler that raises, pending as the threads' join ends (python runs it in
    # its code for that, prints its error and goes on): a getter in C sends the signal to
    # the program's own group (a session of its own, as here), which, unlike os.kill, runs
    # no handler before it returns
    ("signal_handler_pending_at_exit", "python",
     "import functools, os, signal, sys\n"
     "def late(signum, frame):\n    raise RuntimeError('handled after the last line')\n"
     "signal.signal(signal.SIGUSR1, late)\nclass Sends(int):\n"
     "    _shutdown = property(functools.partial(os.killpg, 0))\n"
     "sys.modules['threading'] = Sends(signal.SIGUSR1)\n", PASSED),
    # ... runs the atexit callbacks (whose errors are printed, not a failure) ...
    ("atexit_exit_status_1", "python", "import atexit, os\natexit.register(os._exit, 1)\n", FAILED),
    ("atexit_exit_status_0", "python", "import atexit, os\natexit.register(os._exit, 0)\n", PASSED),
    ("atexit_raises", "python", "import atexit\natexit.register(lambda: 1 / 0)\n", PASSED),
    ("atexit_hangs", "python", "import atexit, time\natexit.register(time.sleep, 30)\n", TIMEOUT),
    # ... and flushes stdout (a failed flush is exit status 120)
    ("stdout_full", "python", "import sys\nsys.stdout = open('/dev/full', 'w')\nprint('x')\n",
     FAILED),
    ("stdout_closed_nothing_written", "python", "import os\nos.close(1)\nassert 1 == 1\n", PASSED),
    ("forked_child_runs_to_the_end", "python",
     "import os\npid = os.fork()\nif pid:\n    os.waitpid(pid, 0)\nassert 1 == 1\n", PASSED),
    ("forked_children_end_as_python_ends_them", "python", FORKED_CHILDREN_END, PASSED),
    ("streams_of_the_program_s_own", "python", OWN_STREAMS, PASSED),
    ("main_names", "python", MAIN_NAMES, PASSED),
    # python's command line (sys.argv[0] as given), and temporary files where python puts them
    ("command_line_and_temporary_files", "python",
     "import os, sys, tempfile\nwith tempfile.NamedTemporaryFile(suffix='.txt') as handle:\n"
     "    assert os.listdir('.') == ['program.py'], os.listdir('.')\n"
     "    assert os.path.dirname(handle.name) == tempfile.gettempdir() != os.getcwd()\n"
     "assert sys.argv == ['program.py'] and sys.orig_argv[1:] == ['program.py'], "
     "(sys.argv, sys.orig_argv)\n", PASSED),
    # the standard streams as python makes them under LANG=C.UTF-8: what UTF-8 cannot encode
    # is escaped (stdout and stdin: surrogateescape; stderr: backslashes), and the originals
    # (sys.__stdout__) are the same; the module's __loader__ reads the file
    ("stdout_lone_surrogate", "python", "print('\\udcff')\n", PASSED),
    ("stderr_lone_surrogate", "python", "import sys\nprint('\\udcff', file=sys.stderr)\n",
     PASSED),
    ("streams_and_loader", "python",
     "import sys\nassert sys.stdout.errors == sys.stdin.errors == 'surrogateescape'\n"
     "assert sys.stderr.errors == 'backslashreplace'\n"
     "assert (sys.__stdin__, sys.__stdout__, sys.__stderr__) == (sys.stdin, sys.stdout, "
     "sys.stderr)\nassert __loader__.get_source('__main__') == open(__file__).read()\n",
     PASSED),
    # signals as python sets them: a write to a pipe nobody reads raises BrokenPipeError
    ("broken_pipe_raises", "python",
     "import os, signal\nassert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN\n"
     "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
     "read, written = os.pipe()\nos.close(read)\ntry:\n    os.write(written, b'x')\n"
     "except BrokenPipeError:\n    pass\nelse:\n    raise AssertionError('no error')\n",
     PASSED),
    # the file is UTF-8, decoded as its coding declaration says
    ("coding_latin1_sees_two_characters", "python",
     "# -*- coding: latin-1 -*-\nassert len('\u00e9') == 1\n", FAILED),
    ("coding_latin1_as_python_reads_it", "python",
     "# -*- coding: latin-1 -*-\nassert len('\u00e9') == 2\n", PASSED),
    ("coding_unknown", "python", "# coding: foobar\nx = 1\n", SYNTAX_ERROR),
    # a declaration counts on the first two lines, whatever ends them, and not on the third
    ("coding_on_line_two_after_a_carriage_return", "python",
     "#!/usr/bin/env python\r# -*- coding: latin-1 -*-\rassert len('\u00e9') == 2\r", PASSED),
    ("coding_on_line_two_after_a_crlf", "python",  # (the byte 0xe9: not UTF-8)
     "#!/usr/bin/env python\r\n# -*- coding: latin-1 -*-\r\nassert '\udce9' == '\\xe9'\r\n",
     PASSED),
    ("coding_on_line_three_is_a_comment", "python",
     "x = 1\r\ny = 2\r\n# -*- coding: latin-1 -*-\nassert len('\u00e9') == 1\n", PASSED),
    # ... and starts with one byte order mark at most (python skips one; a second is an error)
    ("one_byte_order_mark", "python", "\ufeffx = 1\n", PASSED),
    ("two_byte_order_marks", "python", "\ufeff\ufeffx = 1\n", SYNTAX_ERROR),
    # ... which stays in its file, where the program reads it (red-team round 7)
    ("byte_order_mark_in_its_own_file", "python",
     "\ufeffwith open(__file__, 'rb') as f:\n    assert f.read(3) == b'\\xef\\xbb\\xbf'\n",
     PASSED),
    ("byte_order_mark_parsed_from_its_own_file", "python",
     "\ufeffimport ast\ntry:\n    ast.parse(open(__file__, encoding='utf-8').read())\n"
     "except SyntaxError:\n    pass\nelse:\n    raise AssertionError('no byte order mark')\n",
     PASSED),
    ("coding_ascii_with_utf8", "python", "# coding: ascii\ns = '\u00e9'\n", SYNTAX_ERROR),
    # ... as python's file reader reads it: the declaration's own line as it is (an escaped line
    # end in a raw_unicode_escape declaration, a comment, ends no line), bytes that are not UTF-8
    # refused where nothing declares a codec (in a comment too, in a line before a declaration)
    # but after a byte order mark, no other codec after one; and (3.11's compile() aside) no
    # backslash left open at the end of a file whose lines end in CRLF
    ("coding_declaration_line_read_as_it_is", "python",
     "# -*- coding: raw_unicode_escape -*- see \\u000a)\nx = 1\nassert x == 1\n", PASSED),
    ("coding_declaration_hides_no_line", "python",
     "# coding: raw_unicode_escape \\u000adef add(a, b): return a + b\\u000a'''\n"
     "def add(a, b):\n    return a - b\n#'''\nassert add(2, 3) == 5\n", FAILED),
    ("not_utf_8_in_a_comment", "python", "x = 1\n# \udcff\nassert x == 1\n", SYNTAX_ERROR),
    ("not_utf_8_before_the_declaration", "python", "# \udcff\n# coding: latin-1\nx = 1\n",
     SYNTAX_ERROR),
    ("not_utf_8_after_a_byte_order_mark", "python", "\ufeffx = 1  # \udcff\n", PASSED),
    ("codec_after_a_byte_order_mark", "python", "\ufeff# coding: latin-1\nx = 1\n",
     SYNTAX_ERROR),
    ("backslash_open_at_the_end", "python", "x = 1\nassert x == 1\\\r\n", SYNTAX_ERROR),
    # the programs' uid has a name, as a user's has
    ("user_name", "python",
     "import getpass, os, pwd\nassert getpass.getuser() == pwd.getpwuid(os.getuid()).pw_name\n",
     PASSED),
    # sections of a C++ program's own, named otherwise than the loader's, as g++ links them
    ("cpp_sections_of_its_own", "cpp",
     '__attribute__((section("mine"), used)) const int a[2] = {1, 2};\n'
     '__attribute__((section(".data.rel.ro.mine"), used)) const int b[2] = {3, 4};\n'
     '__attribute__((section(".mydata"), used)) int c[2] = {5, 6};\n'
     "#include <cassert>\nint main() { assert(a[1] + b[0] + c[1] == 11); }\n", PASSED),
    ("js_user_info", "javascript", "require('os').userInfo();\n", PASSED),
    ("cpp_user_entry", "cpp", "#include <pwd.h>\n#include <unistd.h>\n"
     "int main() { return getpwuid(getuid()) == nullptr; }\n", PASSED),
    # C++: a process the program forks may return from main; the status is its low byte
    ("cpp_forked_child_returns", "cpp",
     "#include <unistd.h>\n#include <sys/wait.h>\n"
     "int main() {\n  if (fork() == 0) return 0;\n  wait(nullptr);\n}\n", PASSED),
    ("cpp_forked_child_returns_parent_fails", "cpp",
     "#include <unistd.h>\n#include <sys/wait.h>\n"
     "int main() {\n  if (fork() == 0) return 0;\n  wait(nullptr);\n  return 2;\n}\n", FAILED),
    ("cpp_status_256_is_0", "cpp", "int main() { return 256; }\n", PASSED),
    # ... its file holds what it wrote
    ("cpp_reads_its_own_file", "cpp",
     "#include <fstream>\n#include <sstream>\nint main() {\n  std::ifstream f(\"program.cpp\");\n"
     "  std::stringstream s;\n  s << f.rdbuf();\n  return s.str().size() != 160;\n}\n", PASSED),
    # ... reads variables the dynamic loader defines (<sys/rseq.h>'s: copies of them in the
    # executable, which define no name of the loader's)
    ("cpp_reads_the_loader_s_variables", "cpp",
     "#include <cassert>\n#include <sys/rseq.h>\nint main() {\n"
     "  assert(__rseq_size == 0 || __rseq_size >= 20);\n  assert(__rseq_offset != 1);\n}\n",
     PASSED),
    # ... runs functions of its own from .preinit_array (an array aligned to 16 bytes, after
    # the harness's)
    ("cpp_preinit_array_of_its_own", "cpp",
     "#include <cassert>\nstatic int n;\nstatic void one(int, char **, char **) { n += 1; }\n"
     "static void two(int, char **, char **) { n += 2; }\n"
     "__attribute__((section(\".preinit_array\"), used))\n"
     "static void (*mine[])(int, char **, char **) = {one, two};\n"
     "int main() { assert(n == 3); }\n", PASSED),
    # ... a copy of itself that it runs keeps the status its main returns
    ("cpp_runs_a_copy_of_itself", "cpp", CPP_RUNS_ITSELF % 0, PASSED),
    ("cpp_runs_a_failing_copy_of_itself", "cpp", CPP_RUNS_ITSELF % 3, FAILED),
    # JavaScript: a program's own top-level names do not reach the harness
    ("js_own_globalThis", "javascript", "const globalThis = {};\n", PASSED),
    ("js_own_Uint8Array", "javascript", "class Uint8Array {}\n", PASSED),
    ("js_own_globalThis_fails", "javascript",
     "const globalThis = {};\nthrow new Error('x');\n", FAILED),
    # JavaScript: worker threads (which node starts with the main thread's --require) run
    ("js_worker_thread_answers", "javascript", WORKER_THREAD % (
        "parentPort.postMessage(6 * 7)", "assert.strictEqual(answer, 42)"), PASSED),
    ("js_worker_thread_answers_wrong", "javascript", WORKER_THREAD % (
        "parentPort.postMessage(6 * 7)", "assert.strictEqual(answer, 41)"), FAILED),
    ("js_worker_thread_throws", "javascript", WORKER_THREAD % ('throw new Error("x")', ""),
     FAILED),
    ("js_worker_thread_never_ends", "javascript", WORKER_THREAD % ("setInterval(() => {}, 100)",
                                                                   ""), TIMEOUT),
    # ... and processes it forks (which node starts with its --require, fd 3 their channel) run
    # ... and worker threads given options of their own (which the harness then keeps)
    ("js_worker_with_its_own_options_answers", "javascript",
     "const { Worker } = require('worker_threads');\nconst assert = require('assert');\n"
     "new Worker('require(\"worker_threads\").parentPort.postMessage(1 + 2)',\n"
     "           { eval: true, execArgv: ['--no-warnings'] })\n"
     "  .on('message', (answer) => assert.strictEqual(answer, 3));\n"
     "require('v8').setFlagsFromString('--expose-gc');\n", PASSED),
    # ... given options of their own, which they see, a module of the program's among them
    ("js_worker_sees_its_own_options", "javascript",
     "const { Worker } = require('worker_threads');\nconst assert = require('assert');\n"
     "require('fs').writeFileSync('./config-loader.js', 'globalThis.answer = 42;\\n');\n"
     "new Worker('const { parentPort } = require(\"worker_threads\");\\n'\n"
     "           + 'parentPort.postMessage([process.execArgv, globalThis.answer])',\n"
     "           { eval: true, execArgv: ['--require', './config-loader.js'] })\n"
     "  .on('message', (got) => assert.deepStrictEqual(\n"
     "    got, [['--require', './config-loader.js'], 42]));\n", PASSED),
    # ... given an environment (the harness leaves its NODE_OPTIONS out), or sharing the main
    # thread's with no options of their own
    ("js_worker_with_its_own_environment_answers", "javascript",
     "const { Worker } = require('worker_threads');\nconst assert = require('assert');\n"
     "process.env.NODE_OPTIONS = '--no-warnings';\n"
     "new Worker('require(\"worker_threads\").parentPort.postMessage(process.env.A)',\n"
     "           { eval: true, env: { A: 1, NODE_OPTIONS: '--no-deprecation' } })\n"
     "  .on('message', (got) => assert.strictEqual(got, '1'));\n", PASSED),
    ("js_worker_sharing_the_environment_answers", "javascript",
     "const { Worker, SHARE_ENV } = require('worker_threads');\n"
     "const assert = require('assert');\nprocess.env.A = 'b';\n"
     "new Worker('require(\"worker_threads\").parentPort.postMessage(process.env.A)',\n"
     "           { eval: true, env: SHARE_ENV, execArgv: [] })\n"
     "  .on('message', (got) => assert.strictEqual(got, 'b'));\n", PASSED),
    # ... and a package of the program's in a node_modules folder of its working directory
    # (which is itself named node_modules), required from CommonJS or imported
    ("js_requires_a_package_of_its_own", "javascript",
     "const fs = require('fs'), assert = require('assert');\n"
     "fs.mkdirSync('node_modules/own', { recursive: true });\n"
     "fs.writeFileSync('node_modules/own/index.js', 'module.exports = 42;');\n"
     "fs.writeFileSync('node_modules/own/package.json', '{\"name\": \"own\"}');\n"
     "assert.strictEqual(require('own'), 42);\n"
     "import('own').then((m) => assert.strictEqual(m.default, 42));\n", PASSED),
    # ... whatever entry they have (a file, CommonJS or an ES module, a data: URL, an eval),
    # which sees what it would under node: its arguments, its module's names, node's globals
    # for an eval and none for a file, its --require and --import run first, a module of the
    # program's that it imports, and worker threads it starts, which get its options
    *[(f"js_worker_entry_{how}", "javascript",
       "const fs = require('node:fs'), assert = require('node:assert');\n"
       "const { Worker } = require('node:worker_threads');\n"
       "fs.writeFileSync('first.js', 'globalThis.first = (globalThis.first || 0) + 1;\\n');\n"
       "fs.writeFileSync('second.mjs', 'globalThis.second = 2;\\n');\n"
       "fs.writeFileSync('answer.mjs', 'export default 42;\\n');\n"
       f"{setup}let got;\nnew Worker({entry}, {{ argv: ['a'], execArgv: {options}{more} }})\n"
       "  .on('message', (m) => { got = m; })\n"
       f"  .on('exit', () => assert.deepStrictEqual(got, {expected}));\n", PASSED)
      for how, setup, entry, options, more, expected in [
          ("file_common_js",
           "fs.writeFileSync('w.js', `const { parentPort } = require('worker_threads');\n"
           "parentPort.postMessage([process.argv.slice(1), require.main === module,\n"
           "  __filename.endsWith('/w.js'), typeof globalThis.require, '_eval' in process,\n"
           "  globalThis.first, process.execArgv]);\n`);\n", "'./w.js'",
           "['--require', './first.js']", "",
           "[[require('path').resolve('w.js'), 'a'], true, true, 'undefined', false, 1,\n"
           "    ['--require', './first.js']]"),
          ("file_es_module",
           "fs.writeFileSync('w.mjs', `import { parentPort } from 'worker_threads';\n"
           "import answer from './answer.mjs';\n"
           "parentPort.postMessage([import.meta.url.endsWith('/w.mjs'), answer,\n"
           "  globalThis.second, typeof require]);\n`);\n",
           "new URL('file://' + require('path').resolve('w.mjs'))", "['--import', './second.mjs']",
           "", "[true, 42, 2, 'undefined']"),
          ("data_url", "",
           "new URL('data:text/javascript,' + encodeURIComponent(\n"
           "  `import { parentPort } from 'worker_threads';\n"
           "parentPort.postMessage([process.argv.length, globalThis.second, globalThis.first]);`))",
           "['--import=./second.mjs', '-r', './first.js']", "", "[2, 2, 1]"),
          ("eval", "",
           "`const { parentPort } = require('worker_threads');\n"
           "import('./answer.mjs').then(({ default: answer }) => parentPort.postMessage(\n"
           "  [process.argv.slice(1), __filename, process._eval.length > 0, answer,\n"
           "   globalThis.first, typeof module.exports]));`",
           "['--require=./first.js']", ", eval: true",
           "[['[worker eval]', 'a'], '[worker eval]', true, 42, 1, 'object']"),
          ("starting_its_own",
           "", "`const { Worker, parentPort } = require('worker_threads');\n"
           "new Worker('require(\"worker_threads\").parentPort.postMessage("
           "[globalThis.first, process.execArgv])', { eval: true })\n"
           "  .on('message', (m) => parentPort.postMessage(m));`",
           "['--require', './first.js']", ", eval: true", "[1, ['--require', './first.js']]")]],
    ("js_forked_child_answers", "javascript", FORKED_CHILD % "assert.strictEqual(answer, 42)",
     PASSED),
    ("js_forked_child_answers_wrong", "javascript",
     FORKED_CHILD % "assert.strictEqual(answer, 41)", FAILED),
    # JavaScript: async hooks on (AsyncLocalStorage), which node's own calls then go through
    ("js_async_local_storage", "javascript", ASYNC_LOCAL_STORAGE % 5, PASSED),
    ("js_async_local_storage_fails", "javascript", ASYNC_LOCAL_STORAGE % 6, FAILED),
    ("js_async_hooks_before_and_after", "javascript",
     "require('node:async_hooks').createHook({ before() {}, after() {} }).enable();\n"
     "setTimeout(() => require('node:assert').strictEqual(1, 1), 5);\n", PASSED),
    ("js_reads_its_asynchronous_resource", "javascript",
     "const { executionAsyncResource } = require('node:async_hooks');\n"
     "Promise.resolve().then(() => executionAsyncResource());\n"
     "setImmediate(() => require('node:assert').ok(executionAsyncResource()));\n", PASSED),
    # ... and an error object's fields on Object.prototype, which node's fs.writeSync, the
    # harness's, reads after each write (the token went out all the same)
    ("js_error_fields_on_object_prototype", "javascript",
     "Object.prototype.error = null;\nObject.prototype.errno = 0;\n"
     "require('node:assert').strictEqual(1 + 2, 3);\n", PASSED),
    ("js_node_children_elsewhere", "javascript", NODE_CHILDREN_ELSEWHERE, PASSED),
    # JavaScript: a listener of the program's that runs before the harness's and gives node
    # more to do, in CommonJS and in an ES module; the program's own emission of the event
    # before its end
    ("js_more_to_do_before_exit", "javascript", BEFORE_EXIT_WORK % "require('node:assert')",
     PASSED),
    ("js_more_to_do_before_exit_fails", "javascript",
     BEFORE_EXIT_WORK.replace("ok(true)", "ok(false)") % "require('node:assert')", FAILED),
    ("js_module_more_to_do_before_exit", "javascript",
     BEFORE_EXIT_WORK % "(await import('node:assert')).default", PASSED),
    ("js_emits_before_exit_itself", "javascript",
     "require('node:assert').equal(1, 1);\nprocess.emit('beforeExit', 0);\n", PASSED),
    # ... the program's Error frozen, or its stack trace limit fixed (the harness's is its own)
    ("js_frozen_error", "javascript", "Object.freeze(Error);\n", PASSED),
    ("js_fixed_stack_trace_limit", "javascript",
     "Object.defineProperty(Error, 'stackTraceLimit', {value: 0, writable: false});\n", PASSED),
    # ... its working directory holds its own file alone (the harness's is elsewhere): listed,
    # or emptied before a worker thread starts
    ("js_working_directory", "javascript",
     "require('node:assert').deepStrictEqual(require('fs').readdirSync('.'), ['program.js']);\n",
     PASSED),
    ("js_worker_after_the_folder_was_emptied", "javascript",
     "const fs = require('fs');\nfor (const f of fs.readdirSync('.')) fs.rmSync(f);\n"
     "new (require('worker_threads').Worker)('1', {eval: true})\n"
     "  .on('exit', (code) => require('node:assert').equal(code, 0));\n", PASSED),
    # ... `new.target` at its top level (no `return`), with a hashbang line or `arguments`
    ("js_hashbang_and_new_target", "javascript",
     "#!/usr/bin/env node\nrequire('node:assert').equal(new.target, undefined);\n", PASSED),
    ("js_new_target_split_by_a_line_comment", "javascript",
     "const o = { target: [1, 2] };\nconst s = o // new\n  .target.reduce((a, b) => {\n"
     "    return a + b;\n  });\nrequire('node:assert').equal(s, 3);\n", PASSED),
    ("js_a_property_named_new", "javascript",
     "const edge = { new: { target: 2 } };\nrequire('node:assert').equal(edge.new.target, 2);\n",
     PASSED),
    ("js_new_target_in_a_regular_expression", "javascript",
     "const assert = require('node:assert');\nassert.ok(/[new.target]/v.test('w'));\n"
     "assert.ok(/\\new.target/.test('\\new_target'));\n", PASSED),
    # ... options of node's vm on Object.prototype, typed arrays' byteLength redefined (which
    # the harness's own calls do not read)
    ("js_vm_options_on_object_prototype", "javascript",
     "Object.prototype.timeout = function () { return 1; };\n"
     "Object.defineProperty(Object.prototype, 'filename', { value: null, writable: true });\n"
     "require('node:assert').equal(1 + 1, 2);\n", PASSED),
    ("js_typed_arrays_byte_length", "javascript",
     "Object.defineProperty(Uint8Array.prototype, 'byteLength', { get() { return 1; } });\n"
     "require('node:assert').equal(1 + 1, 2);\n", PASSED),
    ("js_arguments_and_new_target", "javascript",
     "require('node:assert').equal(arguments.length + (new.target ? 1 : 0), 5);\n", PASSED),
]

RUNTIMES = {"python": [sys.executable, "program.py"], "javascript": ["node", "program.js"]}


def by_the_runtime(language: str, source: str, folder: Path, limits: Limits = LIMITS) -> str:
    """The outcome when the runtime runs the file itself within ``limits``' time: exit 0
    passes."""
    name = {"python": "program.py", "javascript": "program.js", "cpp": "program.cpp"}[language]
    (folder / name).write_bytes(source.encode("utf-8", "surrogateescape"))
    command = RUNTIMES.get(language, ["./program"])
    if language == "cpp":
        subprocess.run(["g++", "-std=c++17", "program.cpp", "-o", "program"], cwd=folder,
                       check=True)
    process = subprocess.Popen(command, cwd=folder, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                               start_new_session=True)
    try:
        stderr = process.communicate(timeout=limits.timeout_s)[1]
    except subprocess.TimeoutExpired:
        return TIMEOUT
    finally:  # the program's group: a process it started must not outlive the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
    if process.returncode == 0:
        return PASSED
    lines = stderr.strip().splitlines()
    return SYNTAX_ERROR if lines and "SyntaxError" in lines[-1] else FAILED


def test_programs_end_as_their_runtime_ends_them(sandbox: Sandbox, tmp_path: Path) -> None:
    programs = [Program(language, source, LIMITS if expected == TIMEOUT else ROOMY)
                for _, language, source, expected in CASES]
    results = sandbox.run(programs)
    for (name, language, source, expected), program, result in zip(CASES, programs, results,
                                                                    strict=True):
        assert result.outcome == expected, (name, result)
        if language == "cpp" and shutil.which("g++") is None:
            continue
        folder = tmp_path / name
        folder.mkdir()
        assert by_the_runtime(language, source, folder, program.limits) == expected, name


def test_recursion_goes_as_deep_as_under_python(sandbox: Sandbox, tmp_path: Path) -> None:
    """The harness's own frames (and, on Python 3.11, the level its ``exec`` costs) do not
    count against the program: it recurses exactly as deep as under ``python program.py``, its
    code whole or split at its shared tail."""
    head = "def down(n):\n    return 0 if n == 0 else down(n - 1)\n\n"

    def down(depth: int) -> str:
        return f"{head}down({depth})\n"

    deepest = max(depth for depth in range(sys.getrecursionlimit() - 12,
                                           sys.getrecursionlimit() + 3)
                  if subprocess.run([sys.executable, "-c", down(depth)], cwd=tmp_path,
                                    capture_output=True).returncode == 0)
    results = sandbox.run([Program("python", down(depth), ROOMY, tail_at=tail)
                           for depth in (deepest, deepest + 1) for tail in (None, len(head))])
    assert [result.outcome for result in results] == [PASSED, PASSED, FAILED, FAILED], results


def test_a_broken_pipe_kills_a_cpp_program_as_it_does_outside(sandbox: Sandbox,
                                                               tmp_path: Path) -> None:
    """SIGPIPE is python's own business: a program of another language gets its default."""
    source = ("#include <unistd.h>\nint main() {\n  int ends[2];\n  pipe(ends);\n"
              "  close(ends[0]);\n  write(ends[1], \"x\", 1);\n}\n")
    [result] = sandbox.run([Program("cpp", source, ROOMY)])
    assert result.outcome == CRASH and "SIGPIPE" in result.error, result
    if shutil.which("g++") is not None:
        (tmp_path / "program.cpp").write_text(source)
        subprocess.run(["g++", "program.cpp", "-o", "program"], cwd=tmp_path, check=True)
        assert subprocess.run(["./program"], cwd=tmp_path).returncode == -signal.SIGPIPE


def test_a_failed_flush_at_exit_is_explained(sandbox: Sandbox) -> None:
    [source] = [source for name, _, source, _ in CASES if name == "stdout_full"]
    [result] = sandbox.run([Program("python", source, LIMITS)])
    assert "flushing sys.stdout at exit" in result.error and "No space left" in result.error


@pytest.mark.parametrize("source", ["s = '\ud800'\n", "# coding: latin-1\ns = '\ud800'\n"])
def test_a_source_no_file_can_hold_is_a_syntax_error(sandbox: Sandbox, source: str) -> None:
    [result] = sandbox.run([Program("python", source, LIMITS)])
    assert result.outcome == SYNTAX_ERROR
    assert "cannot be written to a file" in result.error


def test_the_import_path_is_the_interpreter_s_own(sandbox: Sandbox) -> None:
    """A Python program imports from where ``python program.py`` would: its own folder, then
    the interpreter's path, and nothing of the sandbox's (the project's folder included)."""
    expected = subprocess.run([sys.executable, "-c", "import sys; print(sys.path[1:])"],
                              capture_output=True, text=True, check=True, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}).stdout.strip()
    source = ("import os, sys\nassert sys.path[0] == os.getcwd()\n"
              f"assert sys.path[1:] == {expected}\n")
    [result] = sandbox.run([Program("python", source, LIMITS)])
    assert result.outcome == PASSED, result


#: Programs that set ``sys.excepthook`` and then fail: the hook writes the error text.
EXCEPTHOOKS = {
    "prints": "import sys, traceback\ndef hook(kind, value, frames):\n"
              "    print('hooked', kind.__name__, value, traceback.extract_tb(frames)[0].name,\n"
              "          file=sys.stderr)\nsys.excepthook = hook\n1 / 0\n",
    "raises": "import sys\ndef hook(*args):\n    raise ValueError('in the hook')\n"
              "sys.excepthook = hook\ndef f():\n    return 1 / 0\nf()\n",
    "missing": "import sys\ndel sys.excepthook\nassert 1 == 2, 'no'\n",
    "none": "import sys\nsys.excepthook = None\nassert 1 == 2\n",
    "print_last": "import sys, traceback\nsys.excepthook = lambda *args: traceback.print_last()\n"
                  "raise KeyError(3)\n",
    "the_value_s_own_frames": "import sys, traceback\n"
                              "sys.excepthook = lambda k, v, f: traceback.print_exception(v)\n"
                              "raise KeyError(3)\n",
    "python_s_own": "import sys\nsys.excepthook = sys.__excepthook__\n[][1]\n",
    # (an audit hook that raises where the harness turns the program's tracing off, after its
    # code: the error text is still the program's)
    "audit_hook_at_the_harness_s_calls": "import sys\ndef hook(event, args):\n"
                                         "    if event in ('sys.settrace', 'sys.setprofile'):\n"
                                         "        raise SystemExit(0)\n"
                                         "sys.addaudithook(hook)\nassert 1 == 2\n",
}


def test_a_program_s_excepthook_writes_its_error_as_under_python(sandbox: Sandbox,
                                                                 tmp_path: Path) -> None:
    """As ``PyErr_Print``: the program's hook gets the traceback from its own frame on, with
    ``sys.last_*`` set; a hook that raises shows its error, then the original; a deleted one
    is said to be missing. The same text as python's (without column markers, as the sandbox
    runs Python)."""
    results = sandbox.run([Program("python", source, ROOMY) for source in EXCEPTHOOKS.values()])
    for (name, source), result in zip(EXCEPTHOOKS.items(), results, strict=True):
        (tmp_path / "program.py").write_text(source)
        python = subprocess.run([sys.executable, "-X", "no_debug_ranges", "program.py"],
                                cwd=tmp_path, capture_output=True, text=True)
        assert python.returncode == 1 and result.outcome == FAILED, (name, result)
        assert result.error == python.stderr.replace(f"{tmp_path}{os.sep}", ""), name
