/* The fork loop: the part of each program's run that happens in the process that forks it,
 * and in the child until the program's own Python (or its execve), in C.
 *
 * Every page a forking process writes between two forks is a page fault once the next fork has
 * shared it, and the Python loop this replaces wrote ~110 of them a program (reference counts,
 * new objects, frames); this one writes a handful. For each program it reads the worker's
 * request (hm_serve; launcher.Forker.launch calls hm_launch directly), draws the program's two
 * secrets, makes its pipes and memory files, forks, sets the child up (prepare_child), waits for
 * the child (or its time limit), reaps it, collects what it left, replies, and forgets it; the
 * child returns to Python, which runs the program. Whatever is unusual (a timeout, a child that
 * cannot be reaped at once, processes the program left behind) it hands back to Python
 * (HM_ATTEND), which kills and reaps, then calls hm_collect. A Python module (PyInit__forkloop,
 * at the end): the loop's calls, and what a Python child calls before and after its program
 * (its request, its secrets), as builtins, which keep the GIL throughout (the forking process
 * has one thread); through ctypes, each call wrote ~6 pages of ctypes' own objects, every one
 * a page the child copies (a child faulted ~16 more). Python's limited API (3.11): one build
 * for every Python 3 from 3.11 (abi3). Linux only.
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* (first: it sets _GNU_SOURCE, as this file needs) */

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_MODE_FILTER
#define SECCOMP_MODE_FILTER 2
#endif
#define TOKEN_BYTES 16
#define REPORT_BYTES 65536
#define FAILURE_BYTES 4096
#define TAIL_BYTES 16384
#define PAYLOAD_STEP ((uint64_t)1 << 20)
#define PAGE_BYTES 4096 /* the secrets' page (at least) */

enum { HM_END = 1, HM_CHILD = 2, HM_DONE = 3, HM_ATTEND = 4, HM_FAILED = 5, HM_BROKEN = 6 };

/* What one program's run needs and leaves (mirrored by launcher._Run). */
struct hm_run {
    /* set by the caller (hm_serve sets the first four from each request) */
    double timeout_s;
    int64_t command; /* an executed command, whose harness reads fd 3 (see untouched) */
    /* the child's rlimits (launcher.Rlimits): data bytes or 0, CPU seconds (the soft limit:
     * a SIGKILL past it reads as its SIGXCPU), file bytes, open files, processes, address
     * space bytes or 0 (a Python child's beyond the mapped bytes it starts with) */
    int64_t rlimits[6];
    int64_t code_at; /* where the code starts in the payload (-1: none) */
    /* set once, by the forking process */
    int64_t mapped;          /* the bytes it maps (VmSize) */
    const char *work;        /* the programs' working directory */
    const void *seccomp;     /* a filter (struct sock_fprog) each child adds, or NULL */
    int32_t cgroup_procs;    /* the memory cgroup's cgroup.procs, that each child joins, or -1 */
    int32_t uid;             /* the programs' uid, which owns fd 3 and 4, or -1 */
    int32_t children;        /* the forking process's open /proc/.../children, or -1 */
    int32_t pidfd;
    unsigned char *secrets; /* T, the pass token, a byte, the report key (launcher._TOKEN_AT) */
    /* the child's descriptors, in the order it installs them: stdin, stdout, stderr, the
     * token pipe, the report pipe, the failure pipe */
    int32_t fds[6];
    int32_t report_r, failure_r;
    int32_t pid;
    int32_t status, timed_out, reaped, escaped, untouched, error;
    unsigned char key[TOKEN_BYTES]; /* the report key, for a Python child */
    unsigned char token[2 * TOKEN_BYTES];
    /* a request's payload, for the child (see launcher.Forker.serve) */
    char *payload;
    uint64_t payload_size, payload_room;
    /* what the program left */
    int64_t report_size, failure_size, out_size, err_size;
    char report[REPORT_BYTES], failure[FAILURE_BYTES], out[TAIL_BYTES], err[TAIL_BYTES];
};

/* A request's header (launcher.ForkServer.launch writes it), then the payload. */
struct hm_request {
    uint64_t payload_size;
    double timeout_s;
    int64_t command;
    int64_t code_at;
    int64_t rlimits[6];
};

/* A reply's header, then the report, the failure, stdout's tail and stderr's. */
struct hm_reply {
    int32_t state; /* HM_DONE, or HM_FAILED: no child was made, status is the errno */
    int32_t status, timed_out, escaped, untouched, pad;
    int64_t report_size, failure_size, out_size, err_size;
    unsigned char token[2 * TOKEN_BYTES];
};

static void close_quietly(int32_t *fd) {
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
        *fd = -1;
    }
}

/* Close what hm_launch made and hm_collect has not closed. */
static void hm_close(struct hm_run *run) {
    for (int i = 0; i < 6; i++)
        close_quietly(&run->fds[i]);
    close_quietly(&run->report_r);
    close_quietly(&run->failure_r);
    close_quietly(&run->pidfd);
}

static void reset(struct hm_run *run) {
    for (int i = 0; i < 6; i++)
        run->fds[i] = -1;
    run->report_r = run->failure_r = run->pidfd = -1;
    run->pid = run->status = run->timed_out = run->reaped = run->escaped = run->untouched = 0;
    run->error = 0;
}

static int write_all(int fd, const void *data, size_t size) {
    const char *at = data;
    while (size) {
        ssize_t done = write(fd, at, size);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        at += done;
        size -= (size_t)done;
    }
    return 0;
}

/* Wait up to timeout_s for the pidfd to turn readable (the child ended): 1, or 0 at the
 * limit, or -1. */
static int wait_readable(int fd, double timeout_s) {
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double whole = timeout_s > 0 ? timeout_s : 0;
    end.tv_sec = now.tv_sec + (time_t)whole;
    end.tv_nsec = now.tv_nsec + (long)((whole - (double)(time_t)whole) * 1e9);
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec += 1;
        end.tv_nsec -= 1000000000L;
    }
    for (;;) {
        struct timespec left;
        clock_gettime(CLOCK_MONOTONIC, &now);
        left.tv_sec = end.tv_sec - now.tv_sec;
        left.tv_nsec = end.tv_nsec - now.tv_nsec;
        if (left.tv_nsec < 0) {
            left.tv_sec -= 1;
            left.tv_nsec += 1000000000L;
        }
        if (left.tv_sec < 0)
            left.tv_sec = left.tv_nsec = 0;
        struct pollfd wanted = {fd, POLLIN, 0};
        int ready = ppoll(&wanted, 1, &left, NULL);
        if (ready >= 0)
            return ready > 0;
        if (errno != EINTR)
            return -1;
    }
}

/* The wait status of an ended child, as launcher._reap gives it; 1 when reaped. */
static int reap_now(struct hm_run *run) {
    int status;
    struct rusage usage;
    pid_t reaped = wait4(run->pid, &status, WNOHANG, &usage);
    if (reaped <= 0)
        return 0;
    double cpu = (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6
                 + (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && cpu >= (double)run->rlimits[1])
        status = SIGXCPU; /* (a wait status: the signal alone) */
    run->status = status;
    run->reaped = 1;
    return 1;
}

/* The sandbox failed before the program started: say why on channel, and end. */
static _Noreturn void child_failed(int channel, const char *what) {
    char why[256];
    int size = snprintf(why, sizeof why, "%s: %s", what, strerror(errno));
    if (size > 0 && write(channel, why, (size_t)size < sizeof why ? (size_t)size : sizeof why)) {
    }
    _exit(70);
}

static int set_limit(int resource, uint64_t soft, uint64_t hard) {
    struct rlimit limit = {soft, hard};
    return setrlimit(resource, &limit);
}

/* What a child sets up before its program, in this order: it joins the memory cgroup (where
 * each child does: launcher.Forker), takes a session of its own, puts its descriptors on 0 to 5
 * (5, the failure channel, closes on exec) and closes every other, enters the working
 * directory, takes its rlimits and seccomp filter, drops to the programs' uid, turns dumpable
 * (its forking process is not) and makes itself the OOM killer's first choice (any process
 * may raise its own score; lowering it needs CAP_SYS_RESOURCE). */
static void prepare_child(struct hm_run *run) {
    int channel = run->fds[5];
    if (run->cgroup_procs >= 0 && write(run->cgroup_procs, "0", 1) != 1) /* 0: the writer */
        child_failed(channel, "joining the memory cgroup");
    if (setsid() < 0)
        child_failed(channel, "setsid");
    /* one among 0 to 5 would be overwritten before it is copied: moved up first */
    for (int number = 0; number < 6; number++)
        if (run->fds[number] < 6 && (run->fds[number] = fcntl(run->fds[number], F_DUPFD, 6)) < 0)
            child_failed(channel, "moving the descriptors");
    for (int number = 0; number < 6; number++)
        if (dup3(run->fds[number], number, number == 5 ? O_CLOEXEC : 0) != number)
            child_failed(channel, "installing the descriptors");
    channel = 5;
    if (syscall(SYS_close_range, 6U, ~0U, 0U) != 0) {
        struct rlimit files;
        if (errno != ENOSYS || getrlimit(RLIMIT_NOFILE, &files) != 0)
            child_failed(channel, "close_range");
        for (rlim_t fd = 6; fd < files.rlim_cur && fd < (1U << 20); fd++)
            close((int)fd);
    }
    if (chdir(run->work) != 0)
        child_failed(channel, "chdir");
    int64_t *limits = run->rlimits;
    int64_t address_space = limits[5] && !run->command ? limits[5] + run->mapped : limits[5];
    if ((limits[0] && set_limit(RLIMIT_DATA, limits[0], limits[0]) != 0)
        || (address_space && set_limit(RLIMIT_AS, address_space, address_space) != 0)
        || set_limit(RLIMIT_CPU, limits[1], limits[1] + 1) != 0
        || set_limit(RLIMIT_FSIZE, limits[2], limits[2]) != 0
        || set_limit(RLIMIT_NOFILE, limits[3], limits[3]) != 0
        || set_limit(RLIMIT_NPROC, limits[4], limits[4]) != 0
        || set_limit(RLIMIT_CORE, 0, 0) != 0)
        child_failed(channel, "setrlimit");
    if (run->seccomp && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, run->seccomp, 0, 0) != 0)
        child_failed(channel, "prctl(SECCOMP)");
    if (run->uid >= 0 && (setgroups(0, NULL) != 0 || setresgid(run->uid, run->uid, run->uid) != 0
                          || setresuid(run->uid, run->uid, run->uid) != 0))
        child_failed(channel, "dropping to the programs' uid");
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0)
        child_failed(channel, "prctl(DUMPABLE)");
    int score = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (score < 0 || write(score, "1000", 4) != 4)
        child_failed(channel, "oom_score_adj");
    close(score);
}

/* Fork the next program. In the child: HM_CHILD, once prepare_child has set it up (the
 * program's signal dispositions, and its Python or its exec, are the caller's). In the forking process: HM_DONE once
 * the child ended and was reaped, leaving nothing behind; HM_ATTEND after a timeout, or where
 * the child cannot be reaped yet, or left processes (pidfd stays open for the caller); -1 with
 * errno set where no child was made (nothing stays open), -2 where one was but its pidfd could
 * not be opened (the child runs on, unwatched: the caller must end). */
static int hm_launch(struct hm_run *run) {
    reset(run);
    int token[2] = {-1, -1}, report[2] = {-1, -1}, failure[2] = {-1, -1};
    /* both secrets at once, and the byte between them, which nothing reads */
    if (getrandom(run->secrets + 1, 2 * TOKEN_BYTES + 1, 0) != 2 * TOKEN_BYTES + 1)
        return -1;
    memcpy(run->key, run->secrets + 2 + TOKEN_BYTES, TOKEN_BYTES);
    if (pipe2(token, O_CLOEXEC) != 0)
        return -1;
    run->fds[3] = token[0];
    /* (a fresh pipe: room for both) */
    int sent = write(token[1], run->secrets + 1, TOKEN_BYTES) == TOKEN_BYTES
               && write(token[1], run->secrets + 2 + TOKEN_BYTES, TOKEN_BYTES) == TOKEN_BYTES;
    close_quietly(&token[1]);
    if (!sent)
        goto failed;
    if (pipe2(report, O_CLOEXEC) != 0)
        goto failed;
    run->report_r = report[0];
    run->fds[4] = report[1];
    if (pipe2(failure, O_CLOEXEC) != 0)
        goto failed;
    run->failure_r = failure[0];
    run->fds[5] = failure[1];
    /* so that /proc/self/fd/3 and 4 can be reopened (the JVM) */
    if (run->uid >= 0 && (fchown(run->fds[3], run->uid, run->uid) != 0
                          || fchown(run->fds[4], run->uid, run->uid) != 0))
        goto failed;
    if ((run->fds[1] = memfd_create("stdout", MFD_CLOEXEC)) < 0
        || (run->fds[2] = memfd_create("stderr", MFD_CLOEXEC)) < 0)
        goto failed;
    /* stdin: /dev/null opened anew, whose locks and flags (flock, O_NONBLOCK) end with the
     * program, where one shared by all would carry them to the next */
    if ((run->fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
        goto failed;
    PyOS_BeforeFork();
    pid_t pid = fork();
    if (pid == 0) {
        PyOS_AfterFork_Child();
        prepare_child(run);
        return HM_CHILD;
    }
    int forked = errno;
    PyOS_AfterFork_Parent();
    if (pid < 0) {
        errno = forked;
        goto failed;
    }
    run->pid = pid;
    close_quietly(&run->fds[0]);
    close_quietly(&run->fds[4]);
    close_quietly(&run->fds[5]);
    run->pidfd = (int32_t)syscall(SYS_pidfd_open, pid, 0);
    if (run->pidfd < 0) {
        run->error = errno;
        return -2;
    }
    int ended = wait_readable(run->pidfd, run->timeout_s);
    if (ended < 0) {
        run->error = errno;
        return -2;
    }
    if (!ended) {
        run->timed_out = 1;
        return HM_ATTEND;
    }
    if (!reap_now(run))
        return HM_ATTEND;
    if (run->children >= 0) {
        char any;
        if (pread(run->children, &any, 1, 0) != 0) /* one left behind (or the read failed) */
            return HM_ATTEND;
    }
    close_quietly(&run->pidfd);
    return HM_DONE;
failed:
    hm_close(run);
    return -1;
}

/* Read what is waiting in the pipe fd, without waiting: an escaped grandchild may still hold
 * its other end. */
static int64_t read_waiting(int fd, char *into, size_t room) {
    if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
        return 0;
    ssize_t got;
    do
        got = read(fd, into, room);
    while (got < 0 && errno == EINTR);
    return got > 0 ? got : 0;
}

/* The end (TAIL_BYTES at most) of what the program wrote to the memory file fd. */
static int64_t tail(int fd, char *into) {
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0)
        return 0;
    off_t from = size > TAIL_BYTES ? size - TAIL_BYTES : 0;
    ssize_t got = pread(fd, into, (size_t)(size - from), from);
    return got > 0 ? got : 0;
}

/* What the ended, reaped child left: its report, the sandbox's failure, the secrets, whether
 * fd 3 still holds them as sent (a command's harness never took them), the tails of stdout
 * and stderr. Closes every descriptor of the run. */
static void hm_collect(struct hm_run *run) {
    run->report_size = read_waiting(run->report_r, run->report, REPORT_BYTES);
    run->failure_size = read_waiting(run->failure_r, run->failure, FAILURE_BYTES);
    /* (the child is gone) the pass token and the report key */
    memcpy(run->token, run->secrets + 1, TOKEN_BYTES);
    memcpy(run->token + TOKEN_BYTES, run->key, TOKEN_BYTES);
    run->untouched = 0;
    if (run->command) {
        char held[2 * TOKEN_BYTES + 1];
        run->untouched = read_waiting(run->fds[3], held, sizeof held) == 2 * TOKEN_BYTES
                         && memcmp(held, run->token, 2 * TOKEN_BYTES) == 0;
        explicit_bzero(held, sizeof held); /* (the stack is the next child's too) */
    }
    run->out_size = tail(run->fds[1], run->out);
    run->err_size = tail(run->fds[2], run->err);
    hm_close(run);
}

static int reply(int fd, struct hm_run *run, int32_t state) {
    struct hm_reply head = {state,           run->status,        run->timed_out,
                            run->escaped,    run->untouched,     0,
                            run->report_size, run->failure_size, run->out_size,
                            run->err_size,   {0}};
    memcpy(head.token, run->token, sizeof head.token);
    struct iovec parts[5] = {{&head, sizeof head},
                             {run->report, (size_t)run->report_size},
                             {run->failure, (size_t)run->failure_size},
                             {run->out, (size_t)run->out_size},
                             {run->err, (size_t)run->err_size}};
    size_t total = 0;
    for (int i = 0; i < 5; i++)
        total += parts[i].iov_len;
    int failed = 0;
    ssize_t done = writev(fd, parts, 5);
    if (done < 0 && errno != EINTR)
        failed = 1;
    else if (done != (ssize_t)total) { /* (a reply larger than the pipe: the rest, by parts) */
        size_t skip = done > 0 ? (size_t)done : 0;
        for (int i = 0; i < 5 && !failed; i++) {
            if (skip >= parts[i].iov_len) {
                skip -= parts[i].iov_len;
                continue;
            }
            failed = write_all(fd, (char *)parts[i].iov_base + skip, parts[i].iov_len - skip);
            skip = 0;
        }
    }
    int saved = errno;
    explicit_bzero(&head, sizeof head); /* (the stack is the next child's too) */
    explicit_bzero(parts, sizeof parts);
    errno = saved;
    return failed ? -1 : 0;
}

/* Forget what the program left, once it has been read: the next program is forked with
 * this memory. */
static void hm_forget(struct hm_run *run) {
    memset(run->report, 0, (size_t)run->report_size);
    memset(run->failure, 0, (size_t)run->failure_size);
    memset(run->out, 0, (size_t)run->out_size);
    memset(run->err, 0, (size_t)run->err_size);
    memset(run->token, 0, sizeof run->token);
    run->report_size = run->failure_size = run->out_size = run->err_size = 0;
    run->status = run->timed_out = run->escaped = run->untouched = 0;
}

static int reply_and_forget(struct hm_run *run, int fd, int32_t state) {
    int sent = reply(fd, run, state);
    int saved = errno;
    hm_forget(run);
    errno = saved;
    return sent;
}

/* Send the reply on a run that hm_collect finished, and forget it. */
static int hm_reply(struct hm_run *run, int fd) { return reply_and_forget(run, fd, HM_DONE); }

static int read_exactly(int fd, void *into, size_t size) {
    char *at = into;
    while (size) {
        ssize_t got = read(fd, at, size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got == 0 ? 0 : -1;
        at += got;
        size -= (size_t)got;
    }
    return 1;
}

/* The fork server's loop: read a request from fd requests, run it, reply on fd replies,
 * until the worker closes its end (HM_END). Returns HM_CHILD in each child (its payload in
 * run->payload), HM_ATTEND where hm_launch did (the caller finishes the run, then calls
 * hm_collect and hm_reply), or HM_BROKEN with run->error (the pipes failed, a request made
 * no sense, or a child could not be watched: the server must end). A child that could not be
 * made is answered HM_FAILED, and the loop goes on. */
static int hm_serve(struct hm_run *run, int requests, int replies) {
    for (;;) {
        struct hm_request head;
        int got = read_exactly(requests, &head, sizeof head);
        if (got == 0)
            return HM_END;
        if (got < 0 || head.payload_size > ((uint64_t)1 << 40)) {
            run->error = got < 0 ? errno : EPROTO;
            return HM_BROKEN;
        }
        if (head.payload_size > run->payload_room) {
            /* a new buffer, the old one zeroed (freed memory keeps what it held), in whole
             * MiB: its size tells later programs no more than that a larger one came */
            if (run->payload != NULL) /* (explicit: no compiler drops it before the free) */
                explicit_bzero(run->payload, run->payload_size);
            free(run->payload);
            run->payload_size = run->payload_room = 0;
            uint64_t room = (head.payload_size + PAYLOAD_STEP - 1) / PAYLOAD_STEP * PAYLOAD_STEP;
            if ((run->payload = malloc(room)) == NULL) {
                run->error = ENOMEM;
                return HM_BROKEN;
            }
            run->payload_room = room;
        }
        if (head.code_at > (int64_t)head.payload_size) { /* (the worker never sends one) */
            run->error = EPROTO;
            return HM_BROKEN;
        }
        if (read_exactly(requests, run->payload, head.payload_size) != 1) {
            run->error = errno ? errno : EPROTO;
            return HM_BROKEN;
        }
        /* what is left of a longer payload before it, zeroed: no program finds another's
         * source in its memory */
        if (run->payload_size > head.payload_size)
            memset(run->payload + head.payload_size, 0, run->payload_size - head.payload_size);
        run->payload_size = head.payload_size;
        run->timeout_s = head.timeout_s;
        run->command = head.command;
        run->code_at = head.code_at;
        memcpy(run->rlimits, head.rlimits, sizeof run->rlimits);
        int state = hm_launch(run);
        if (state == HM_CHILD || state == HM_ATTEND)
            return state;
        if (state == -2)
            return HM_BROKEN;
        if (state == -1) { /* nothing ran: the reply's status is the errno, and no part */
            int why = errno;
            hm_forget(run);
            run->status = why;
            if (reply_and_forget(run, replies, HM_FAILED) != 0) {
                run->error = errno;
                return HM_BROKEN;
            }
            continue;
        }
        hm_collect(run);
        if (hm_reply(run, replies) != 0) {
            run->error = errno;
            return HM_BROKEN;
        }
    }
}

/* The worker's check after each program that it left nothing (leftovers.CleanState): what the
 * worker's last full sweep left, recorded (hm_clean_record), and compared in one call
 * (hm_clean_unchanged): files whose whole content must be as recorded (the worker's list of
 * children, its memory cgroup's events), directories whose inode, mode, size (an entry count)
 * and times must be (the private temporary folders, the message queues'), processes that must
 * still run (the fork server), the memory cgroup's usage within its room, the first line of
 * the network namespace's socket count as before the program (hm_clean_begin), and no System V
 * IPC object. Anything else, and the worker sweeps in full. */
#define CLEAN_READS 2
#define CLEAN_PATHS 8
#define CLEAN_PIDFDS 2
#define CLEAN_BYTES 1024
#define CLEAN_PATH_BYTES 256
#define SOCKETS_BYTES 64

struct hm_clean {
    int32_t reads, paths;           /* the probes in use of each kind */
    int32_t read_fd[CLEAN_READS];   /* files whose content must stay as recorded */
    int32_t read_size[CLEAN_READS]; /* (as recorded; -1: too long to compare) */
    int32_t pidfd[CLEAN_PIDFDS];    /* processes that must still run (-1: none) */
    int32_t usage_fd;               /* the cgroup's usage (-1: none), at most room */
    int32_t sockets_fd;             /* the socket count (-1: none) */
    int32_t sockets_size;           /* (its first line's, as hm_clean_begin read it) */
    int32_t no_ipc;                 /* whether no System V IPC object may be there */
    int64_t room;
    int64_t status[CLEAN_PATHS][5]; /* inode, mode, size, access and modification times */
    char read_bytes[CLEAN_READS][CLEAN_BYTES];
    char sockets_line[SOCKETS_BYTES];
    char path[CLEAN_PATH_BYTES * CLEAN_PATHS];
};

/* The first line of fd (a /proc file) into line; its size, or -1. */
static int32_t first_line(int fd, char *line) {
    ssize_t got = pread(fd, line, SOCKETS_BYTES, 0);
    if (got <= 0)
        return -1;
    char *end = memchr(line, '\n', (size_t)got);
    return end == NULL ? -1 : (int32_t)(end - line);
}

static int status_of(const char *path, int64_t status[5]) {
    struct stat found;
    if (lstat(path, &found) != 0)
        return -1;
    int64_t now[5] = {(int64_t)found.st_ino, (int64_t)found.st_mode, (int64_t)found.st_size,
                      (int64_t)found.st_atim.tv_sec * 1000000000 + found.st_atim.tv_nsec,
                      (int64_t)found.st_mtim.tv_sec * 1000000000 + found.st_mtim.tv_nsec};
    memcpy(status, now, sizeof now);
    return 0;
}

/* Whether the probes in use fit the struct (0 with errno EINVAL where not). */
static int clean_fits(const struct hm_clean *clean) {
    if (clean->reads < 0 || clean->reads > CLEAN_READS || clean->paths < 0
        || clean->paths > CLEAN_PATHS) {
        errno = EINVAL;
        return 0;
    }
    return 1;
}

/* Record what is there now (the worker's sweep has just left all clean); -1 with errno. */
static int hm_clean_record(struct hm_clean *clean) {
    if (!clean_fits(clean))
        return -1;
    for (int i = 0; i < clean->reads; i++) {
        ssize_t got = pread(clean->read_fd[i], clean->read_bytes[i], CLEAN_BYTES, 0);
        if (got < 0)
            return -1;
        clean->read_size[i] = got < CLEAN_BYTES ? (int32_t)got : -1;
    }
    for (int i = 0; i < clean->paths; i++)
        if (status_of(clean->path + i * CLEAN_PATH_BYTES, clean->status[i]) != 0)
            return -1;
    return 0;
}

/* Before a program: the socket count's first line. */
static void hm_clean_begin(struct hm_clean *clean) {
    clean->sockets_size = clean->sockets_fd < 0 ? 0
                                                : first_line(clean->sockets_fd, clean->sockets_line);
}

/* Whether all is as recorded (1), or anything differs or cannot be read (0). */
static int hm_clean_unchanged(struct hm_clean *clean) {
    if (!clean_fits(clean))
        return 0;
    for (int i = 0; i < CLEAN_PIDFDS; i++) {
        if (clean->pidfd[i] < 0)
            continue;
        struct pollfd ended = {clean->pidfd[i], POLLIN, 0};
        if (poll(&ended, 1, 0) != 0)
            return 0;
    }
    char now[CLEAN_BYTES + 1];
    for (int i = 0; i < clean->reads; i++) {
        int32_t size = clean->read_size[i];
        if (size < 0 || pread(clean->read_fd[i], now, (size_t)size + 1, 0) != size
            || memcmp(now, clean->read_bytes[i], (size_t)size) != 0)
            return 0;
    }
    for (int i = 0; i < clean->paths; i++) {
        int64_t status[5];
        if (status_of(clean->path + i * CLEAN_PATH_BYTES, status) != 0
            || memcmp(status, clean->status[i], sizeof status) != 0)
            return 0;
    }
    if (clean->sockets_fd >= 0) {
        if (clean->sockets_size < 0 || first_line(clean->sockets_fd, now) != clean->sockets_size
            || memcmp(now, clean->sockets_line, (size_t)clean->sockets_size) != 0)
            return 0;
    }
    if (clean->usage_fd >= 0) {
        ssize_t got = pread(clean->usage_fd, now, 32, 0);
        if (got <= 0)
            return 0;
        now[got] = '\0';
        char *end;
        errno = 0;
        long long used = strtoll(now, &end, 10);
        if (errno != 0 || end == now || used > clean->room)
            return 0;
    }
    if (clean->no_ipc) {
        struct shm_info shared;
        struct seminfo semaphores;
        struct msginfo messages;
        union semun { /* (the caller defines it: sem.h) */
            int val;
            struct semid_ds *buf;
            unsigned short *array;
            struct seminfo *__buf;
        } about = {.__buf = &semaphores};
        if (shmctl(0, SHM_INFO, (struct shmid_ds *)&shared) < 0 || shared.used_ids != 0
            || semctl(0, 0, SEM_INFO, about) < 0 || semaphores.semusz != 0
            || msgctl(0, MSG_INFO, (struct msqid_ds *)&messages) < 0 || messages.msgpool != 0)
            return 0;
    }
    return 1;
}

/* The module (launcher.fork_loop): the loop's calls, and the child's (launcher._python_main,
 * Forker.serve and Forker._child), as Python builtins. Addresses come as ints: the run
 * (ctypes.addressof of a launcher._Run), the secrets' page (launcher._TOKEN_AT). */

static void *address_of(PyObject *value) {
    void *at = PyLong_AsVoidPtr(value);
    if (at == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a null address");
    return at;
}

/* request(run): the child's request, read in place, as (head, code): memoryviews of the
 * payload's marshalled (argv, source) and of the code after it (None where none came). */
static PyObject *py_request(PyObject *module, PyObject *run_at) {
    (void)module;
    struct hm_run *run = address_of(run_at);
    if (run == NULL)
        return NULL;
    Py_ssize_t size = (Py_ssize_t)run->payload_size;
    Py_ssize_t end = run->code_at < 0 ? size : (Py_ssize_t)run->code_at;
    if (end > size) {
        PyErr_SetString(PyExc_ValueError, "the request's code lies past its end");
        return NULL;
    }
    PyObject *head = PyMemoryView_FromMemory(run->payload, end, PyBUF_READ);
    if (head == NULL)
        return NULL;
    PyObject *code = run->code_at < 0 ? Py_NewRef(Py_None)
                                      : PyMemoryView_FromMemory(run->payload + end, size - end,
                                                                PyBUF_READ);
    if (code == NULL) {
        Py_DECREF(head);
        return NULL;
    }
    PyObject *both = PyTuple_Pack(2, head, code);
    Py_DECREF(head);
    Py_DECREF(code);
    return both;
}

/* key(run): the program's report key, as bytes. */
static PyObject *py_key(PyObject *module, PyObject *run_at) {
    (void)module;
    struct hm_run *run = address_of(run_at);
    return run == NULL ? NULL : PyBytes_FromStringAndSize((const char *)run->key, TOKEN_BYTES);
}

/* The arguments of read_token and mark: the secrets' address, then a number from 0 to most;
 * 0 where they are not so (the exception set). */
static int secrets_and_number(PyObject *const *args, Py_ssize_t count, const char *usage,
                              long most, unsigned char **secrets, long *number) {
    if (count != 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return 0;
    }
    if ((*secrets = address_of(args[0])) == NULL)
        return 0;
    *number = PyLong_AsLong(args[1]);
    if (*number == -1 && PyErr_Occurred())
        return 0;
    if (*number < 0 || *number > most) {
        PyErr_SetString(PyExc_ValueError, usage);
        return 0;
    }
    return 1;
}

/* read_token(secrets, fd): "T" and the pass token from fd into the secrets' page, whose
 * first byte says what is sent (see mark); OSError where the TOKEN_BYTES did not come. */
static PyObject *py_read_token(PyObject *module, PyObject *const *args, Py_ssize_t count) {
    (void)module;
    unsigned char *secrets;
    long fd;
    if (!secrets_and_number(args, count, "read_token(secrets, fd)", INT32_MAX, &secrets, &fd))
        return NULL;
    secrets[0] = 'T';
    ssize_t got = read((int)fd, secrets + 1, TOKEN_BYTES);
    if (got != TOKEN_BYTES) {
        errno = got < 0 ? errno : EPROTO;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* mark(secrets, kind): the byte sent before the pass token ("S": the program does not
 * compile). */
static PyObject *py_mark(PyObject *module, PyObject *const *args, Py_ssize_t count) {
    (void)module;
    unsigned char *secrets;
    long kind;
    if (!secrets_and_number(args, count, "mark(secrets, a byte)", 255, &secrets, &kind))
        return NULL;
    secrets[0] = (unsigned char)kind;
    Py_RETURN_NONE;
}

/* send_token(fd, secrets, size, pid): in the process pid, write the secrets' first size bytes
 * to fd, and say whether all went; in another (one the program forked, returning through its
 * harness's frame), send nothing and say True. An object of a type of its own, not a builtin:
 * the harness calls it as the program's code returns, where a profile function of the
 * program's still runs, and sees the call of a builtin ("c_call"), as python's own exit
 * shows it none. */
static PyObject *send_token(PyObject *self, PyObject *args, PyObject *keywords) {
    (void)self;
    long fd, pid;
    PyObject *at;
    Py_ssize_t size;
    if (keywords != NULL) {
        PyErr_SetString(PyExc_TypeError, "send_token takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "lOnl", &fd, &at, &size, &pid))
        return NULL;
    const void *secrets = address_of(at);
    if (secrets == NULL)
        return NULL;
    if (size < 0 || size > PAGE_BYTES || fd < 0 || fd > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "send_token: no such size or descriptor");
        return NULL;
    }
    if ((long)getpid() != pid)
        Py_RETURN_TRUE;
    return PyBool_FromLong(write((int)fd, secrets, (size_t)size) == size);
}

static PyType_Slot sender_slots[] = {
    {Py_tp_call, send_token},
    {Py_tp_doc, "send_token(fd, secrets, size, pid): the pass token, from its page."},
    {0, NULL},
};

static PyType_Spec sender_spec = {
    "_forkloop.TokenSender", 0, 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
    sender_slots,
};

/* The arguments of the loop's calls that take descriptors: the run at the address args[0], and
 * the descriptors after it; 0 where they are not so (the exception set). */
static int loop_arguments(PyObject *const *args, Py_ssize_t count, Py_ssize_t fds,
                          struct hm_run **run, int *fd) {
    if (count != 1 + fds) {
        PyErr_SetString(PyExc_TypeError, "the fork loop's calls take the run and its descriptors");
        return 0;
    }
    if ((*run = address_of(args[0])) == NULL)
        return 0;
    for (Py_ssize_t i = 0; i < fds; i++) {
        long value = PyLong_AsLong(args[1 + i]);
        if (value == -1 && PyErr_Occurred())
            return 0;
        if (value < 0 || value > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "no such descriptor");
            return 0;
        }
        fd[i] = (int)value;
    }
    return 1;
}

static PyObject *py_launch(PyObject *module, PyObject *run_at) {
    (void)module;
    struct hm_run *run = address_of(run_at);
    return run == NULL ? NULL : PyLong_FromLong(hm_launch(run));
}

static PyObject *py_serve(PyObject *module, PyObject *const *args, Py_ssize_t count) {
    (void)module;
    struct hm_run *run;
    int fd[2];
    return loop_arguments(args, count, 2, &run, fd) ? PyLong_FromLong(hm_serve(run, fd[0], fd[1]))
                                                     : NULL;
}

static PyObject *py_reply(PyObject *module, PyObject *const *args, Py_ssize_t count) {
    (void)module;
    struct hm_run *run;
    int fd[1];
    return loop_arguments(args, count, 1, &run, fd) ? PyLong_FromLong(hm_reply(run, fd[0])) : NULL;
}

/* One of the loop's calls that returns nothing, on the run at run_at. */
static PyObject *on_run(PyObject *run_at, void (*call)(struct hm_run *)) {
    struct hm_run *run = address_of(run_at);
    if (run == NULL)
        return NULL;
    call(run);
    Py_RETURN_NONE;
}

static PyObject *py_collect(PyObject *module, PyObject *run_at) {
    (void)module;
    return on_run(run_at, hm_collect);
}

static PyObject *py_close(PyObject *module, PyObject *run_at) {
    (void)module;
    return on_run(run_at, hm_close);
}

static PyObject *py_forget(PyObject *module, PyObject *run_at) {
    (void)module;
    return on_run(run_at, hm_forget);
}

static PyObject *py_clean_record(PyObject *module, PyObject *clean_at) {
    (void)module;
    struct hm_clean *clean = address_of(clean_at);
    if (clean == NULL)
        return NULL;
    if (hm_clean_record(clean) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *py_clean_begin(PyObject *module, PyObject *clean_at) {
    (void)module;
    struct hm_clean *clean = address_of(clean_at);
    if (clean == NULL)
        return NULL;
    hm_clean_begin(clean);
    Py_RETURN_NONE;
}

static PyObject *py_clean_unchanged(PyObject *module, PyObject *clean_at) {
    (void)module;
    struct hm_clean *clean = address_of(clean_at);
    return clean == NULL ? NULL : PyBool_FromLong(hm_clean_unchanged(clean));
}

#define FAST(name) (PyCFunction)(void (*)(void))(name), METH_FASTCALL

static PyMethodDef methods[] = {
    {"launch", py_launch, METH_O, "launch(run): fork the next program (hm_launch)."},
    {"serve", FAST(py_serve), "serve(run, requests, replies): the fork server's loop (hm_serve)."},
    {"reply", FAST(py_reply), "reply(run, fd): send the reply and forget the run (hm_reply)."},
    {"collect", py_collect, METH_O, "collect(run): what the program left (hm_collect)."},
    {"close", py_close, METH_O, "close(run): what hm_launch made and hm_collect has not closed."},
    {"forget", py_forget, METH_O, "forget(run): zero what the run holds of its program."},
    {"request", py_request, METH_O, "The child's request: (head, code), memoryviews."},
    {"key", py_key, METH_O, "The program's report key."},
    {"read_token", FAST(py_read_token), "'T' and the pass token into the secrets' page."},
    {"mark", FAST(py_mark), "The byte sent before the pass token."},
    {"clean_record", py_clean_record, METH_O, "clean_record(clean): what is there now."},
    {"clean_begin", py_clean_begin, METH_O, "clean_begin(clean): before a program."},
    {"clean_unchanged", py_clean_unchanged, METH_O, "clean_unchanged(clean): as recorded?"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_forkloop", "The sandbox's fork loop (see _forkloop.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__forkloop(void) {
    PyObject *loop = PyModule_Create(&module);
    if (loop == NULL)
        return NULL;
    PyObject *sender = NULL, *type = PyType_FromSpec(&sender_spec);
    if (type != NULL)
        sender = PyType_GenericAlloc((PyTypeObject *)type, 0);
    Py_XDECREF(type);
    int added = sender != NULL && PyModule_AddObjectRef(loop, "send_token", sender) == 0
                /* the layout of struct hm_clean, which leftovers._Clean mirrors */
                && PyModule_AddIntConstant(loop, "CLEAN_SIZE", sizeof(struct hm_clean)) == 0
                && PyModule_AddIntConstant(loop, "CLEAN_READS", CLEAN_READS) == 0
                && PyModule_AddIntConstant(loop, "CLEAN_PATHS", CLEAN_PATHS) == 0
                && PyModule_AddIntConstant(loop, "CLEAN_PIDFDS", CLEAN_PIDFDS) == 0
                && PyModule_AddIntConstant(loop, "CLEAN_BYTES", CLEAN_BYTES) == 0
                && PyModule_AddIntConstant(loop, "CLEAN_PATH_BYTES", CLEAN_PATH_BYTES) == 0
                && PyModule_AddIntConstant(loop, "SOCKETS_BYTES", SOCKETS_BYTES) == 0;
    Py_XDECREF(sender);
    if (!added) {
        Py_DECREF(loop);
        return NULL;
    }
    return loop;
}
