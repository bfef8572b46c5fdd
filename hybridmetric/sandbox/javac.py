"""A warm Java compiler per worker: javac in one long-lived JVM instead of a JVM per program.

Starting ``javac`` costs about 0.6 s of JVM start-up and class loading; the compile itself takes a
few tens of milliseconds once the compiler is loaded and JIT-compiled. Each worker therefore runs
one compile server (``javax.tools.ToolProvider.getSystemJavaCompiler().run``, a fresh compiler
context per program) that reads one request per line (tab-separated javac arguments) and answers
``<exit status> <byte count>`` followed by that many bytes of diagnostics.

The server never runs the program's code: annotation processing is off (``-proc:none``). It runs
inside the worker's namespaces and seccomp filter, with rlimits, and, when the sandbox runs as
root, as a second unprivileged uid of its own (``uid + UID_OFFSET``), so that neither the program
(another uid) nor the escapee sweep (which spares the server) can touch it. A compile that
outlasts its time limit, or a server that dies, is killed and a fresh server starts on the next
program.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import time

from hybridmetric.sandbox import isolation, languages

#: The compiler runs as ``uid + UID_OFFSET`` (the sandbox uids span 1000 values from 61000).
UID_OFFSET = 1000
#: RLIMIT_DATA of the compiler's JVM (heap, code cache, metaspace, thread stacks).
MEMORY_MB = 3072
JVM_FLAGS = ["-Xlog:all=warning:stderr", "-XX:+UseSerialGC", "-XX:-UsePerfData",
             "-Xshare:auto", "-Xss16m", "-Xmx1g"]
MAIN = "HybridmetricJavac"
#: Seconds the server's JVM may take to start (and to build the server once).
STARTUP_TIMEOUT_S = 120.0
#: Bytes of javac's diagnostics the server sends from their start, and as many from their end
#: (a program can make javac quote a huge line at each of its 100 errors; the verdict keeps
#: ``limits.ERROR_CAP`` characters of them).
DIAGNOSTICS_KEPT = 1 << 18
SOURCE = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

public class HybridmetricJavac {
  public static void main(String[] ignored) throws IOException {
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    OutputStream out = new FileOutputStream(FileDescriptor.out);
    out.write("ready\n".getBytes(StandardCharsets.UTF_8));
    out.flush();
    String line;
    while ((line = in.readLine()) != null) {
      Ends log = new Ends();
      PrintStream printer = new PrintStream(log, true, "UTF-8");
      int status;
      try {
        status = javac.run(null, printer, printer, line.split("\t"));
      } catch (Throwable failure) {  // a compiler crash: report it, then let the worker restart us
        failure.printStackTrace(printer);
        status = -1;
      }
      printer.flush();
      byte[] text = log.bytes();
      out.write((status + " " + text.length + "\n").getBytes(StandardCharsets.UTF_8));
      out.write(text);
      out.flush();
      if (status < 0) System.exit(3);
    }
  }

  /** The first and the last LIMIT bytes written to it, and a count of those between. */
  static final class Ends extends OutputStream {
    static final int LIMIT = DIAGNOSTICS_KEPT;
    private final ByteArrayOutputStream head = new ByteArrayOutputStream();
    private final byte[] tail = new byte[LIMIT];
    private long total;

    @Override public void write(int b) {
      if (total < LIMIT) head.write(b);
      else tail[(int) ((total - LIMIT) % LIMIT)] = (byte) b;
      total++;
    }

    @Override public void write(byte[] b, int off, int len) {
      for (int i = 0; i < len; i++) write(b[off + i]);
    }

    byte[] bytes() {
      if (total <= LIMIT) return head.toByteArray();
      long after = total - LIMIT;
      int kept = (int) Math.min(after, LIMIT);
      ByteArrayOutputStream all = new ByteArrayOutputStream();
      all.write(head.toByteArray(), 0, LIMIT);
      if (after > LIMIT) {
        String cut = "\n...[" + (after - LIMIT) + " bytes of javac's output cut]...\n";
        all.write(cut.getBytes(StandardCharsets.UTF_8), 0, cut.length());
      }
      int start = (int) ((after - kept) % LIMIT);
      for (int i = 0; i < kept; i++) all.write(tail[(start + i) % LIMIT]);
      return all.toByteArray();
    }
  }
}
""".replace("DIAGNOSTICS_KEPT", str(DIAGNOSTICS_KEPT))


class CompileError(Exception):
    """The compile server failed (not the program): it died or could not start."""


class JavacServer:
    """One compile server, started on first use and restarted after a timeout or a crash."""

    def __init__(self, root: str, uid: int | None):
        self.directory = os.path.join(root, "javac")
        self.uid = None if uid is None else uid + UID_OFFSET
        self.home = os.path.join(root, "javac-home")  # the JVM's HOME and temporary files
        self.log = os.path.join(root, "javac.log")  # the JVM's own messages
        self._state: tuple | None = None  # isolation.tree_state of the built server
        self._log = -1  # the log of the last server started, kept open to read its end
        self._home_state: tuple | None = None  # isolation.tree_state of home when it stopped
        self.pid: int | None = None
        self._pidfd = self._requests = self._replies = -1
        self._buffer = bytearray()

    def alive(self) -> bool:
        """Whether the server runs; a dead one (a program may kill it when it shares the
        program's uid) is forgotten, so that the sweep never spares a reused pid."""
        if self.pid is not None and select.select([self._pidfd], [], [], 0)[0]:
            self.stop()
        return self.pid is not None

    def compile(self, arguments: list[str], timeout_s: float) -> tuple[int | None, str]:
        """(javac's exit status, diagnostics); status None when the compile ran out of time.

        javac's statuses other than 0 (compiled) and 1 (errors in the program) mean the compiler
        itself failed (out of memory, a crash): the compile is retried once in a fresh server,
        and a second failure is the program's (it breaks javac every time)."""
        if any("\t" in a or "\n" in a for a in arguments):
            raise CompileError(f"javac arguments may not contain tabs or newlines: {arguments}")
        status, text = self._compile_once(arguments, timeout_s, retry=True)
        if status not in (None, 0, 1):
            self.stop()
            status, text = self._compile_once(arguments, timeout_s, retry=False)
            if status not in (None, 0, 1):  # (that server exits: gone before the program runs)
                self.stop()
        return status, text

    def _compile_once(self, arguments: list[str], timeout_s: float,
                      retry: bool) -> tuple[int | None, str]:
        if not self.alive():
            self._start()
        try:
            os.write(self._requests, ("\t".join(arguments) + "\n").encode("utf-8"))
            deadline = time.monotonic() + timeout_s  # (the compile and its reply)
            header = self._read_line(deadline)
            if header is None:
                self.stop()
                return None, f"compiling took over {timeout_s} s"
            status, size = (int(field) for field in header.split())
            text = self._read_exactly(size, deadline)
        except (OSError, ValueError) as exc:
            self.stop()
            if retry:  # the server died between two programs: a fresh one gets the compile
                return self._compile_once(arguments, timeout_s, retry=False)
            raise CompileError(f"the Java compile server failed: {exc}\n{self._log_tail()}") \
                from exc
        return status, text.decode("utf-8", "replace")

    def _start(self) -> None:
        self._build()
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        env = self._env()
        argv = [languages.tool("java"), *JVM_FLAGS, f"-Djava.io.tmpdir={self.home}",
                "-cp", self.directory, MAIN]
        isolation.remove_tree(self.log)  # whatever a program put there (without root it could)
        isolation.remove_tree(self.home)
        os.mkdir(self.home, 0o755)
        with contextlib.suppress(OSError):
            os.close(self._log)
        self._log = log = os.open(self.log, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                  0o600)
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                os.chdir(self.home)
                os.dup2(requests_r, 0)
                os.dup2(replies_w, 1)
                os.dup2(log, 2)
                os.closerange(3, 1 << 20)
                os.umask(0o022)  # the program (another uid) reads the classes
                memory = MEMORY_MB * 2**20
                resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
                resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 2**20, 64 * 2**20))
                resource.setrlimit(resource.RLIMIT_NPROC, (256, 256))
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                isolation.drop_privileges(self.uid)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(70)
        for fd in (requests_r, replies_w):
            os.close(fd)
        self.pid, self._requests, self._replies = pid, requests_w, replies_r
        self._buffer = bytearray()
        self._pidfd = os.pidfd_open(pid)
        try:
            ready = self._read_line(time.monotonic() + STARTUP_TIMEOUT_S)
        except OSError:
            ready = None
        if ready != "ready":
            self.stop()
            raise CompileError(f"the Java compile server did not start:\n{self._log_tail()}")

    def _build(self) -> None:
        """Compile the server itself once (trusted source, like the precompiled C++ header; see
        :meth:`intact` for how a change to it is found)."""
        if self._state is not None:
            return
        import subprocess  # here, not above: a worker that forks programs stays free of threading

        isolation.remove_tree(self.directory)  # what a failed build left
        os.mkdir(self.directory, 0o755)
        with open(os.path.join(self.directory, f"{MAIN}.java"), "w") as handle:
            handle.write(SOURCE)
        try:
            done = subprocess.run([languages.tool("javac"), "-nowarn", "-d", ".",
                                   f"{MAIN}.java"], cwd=self.directory, capture_output=True,
                                  text=True, timeout=STARTUP_TIMEOUT_S, check=False,
                                  env=self._env())
        except subprocess.TimeoutExpired as exc:
            raise CompileError("building the Java compile server took too long") from exc
        if done.returncode != 0:
            raise CompileError(f"building the Java compile server failed:\n{done.stderr[-2000:]}")
        for name in os.listdir(self.directory):
            os.chmod(os.path.join(self.directory, name), 0o644)
        self._state = isolation.tree_state(self.directory)

    def _env(self) -> dict[str, str]:
        """The compiler's whole environment (the worker's own is the programs')."""
        return {"PATH": languages.SEARCH_PATH, "LANG": "C.UTF-8", "HOME": self.home}

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            size = os.fstat(self._log).st_size
            return os.pread(self._log, 2000, max(0, size - 2000)).decode("utf-8", "replace")
        return ""

    def _read_line(self, deadline: float) -> str | None:
        while b"\n" not in self._buffer:
            if not self._fill(deadline):
                return None
        end = self._buffer.index(b"\n")
        line = bytes(self._buffer[:end])
        del self._buffer[:end + 1]
        return line.decode("ascii")

    def _read_exactly(self, size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            if not self._fill(deadline):
                raise OSError("the compile server stopped answering mid-reply")
        text = bytes(self._buffer[:size])
        del self._buffer[:size]
        return text

    def _fill(self, deadline: float) -> bool:
        """Read what the server sent; False when nothing came before ``deadline`` (of
        ``time.monotonic``)."""
        if not select.select([self._replies], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return False
        chunk = os.read(self._replies, 1 << 16)
        if not chunk:
            raise OSError("the compile server exited")
        self._buffer += chunk  # (a bytearray: what comes is appended, not copied again)
        return True

    def stop(self) -> None:
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)  # never a reused pid
        with contextlib.suppress(ChildProcessError):  # the sweep may have reaped it already
            os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED)
        for fd in (self._requests, self._replies, self._pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pid = None
        self._pidfd = self._requests = self._replies = -1
        self._home_state = isolation.tree_state(self.home)

    def entries(self) -> set[str]:
        """The names the server has made in the worker's folder so far."""
        made = [self.directory] if self._state is not None else []
        made += [self.home, self.log] if self._log != -1 else []
        return {os.path.basename(path) for path in made}

    def intact(self) -> bool:
        """Whether the server's files are as the worker left them: the built server unchanged,
        the log still our file, and (while no server runs) its home unchanged."""
        if self._state is not None and isolation.tree_state(self.directory) != self._state:
            return False
        if self._log == -1:
            return True
        log, ours = os.lstat(self.log), os.fstat(self._log)
        return ((log.st_ino, log.st_dev) == (ours.st_ino, ours.st_dev)
                and (self.pid is not None or isolation.tree_state(self.home) == self._home_state))
