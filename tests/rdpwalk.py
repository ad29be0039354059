#!/usr/bin/env python3
# rdpwalk.py — read a directory the way coreutils' rm -rf does, for the
# fs_rdp and clu_rdp tests: open it, ONE getdents (is_empty_dir), close;
# open it again and read it to the end (fts), then lstat every entry.
#
#   rdpwalk.py [--wait FILE] [--plain] [--lax] DIR
#
# --wait FILE: after the first read create FILE.ready and wait until
# FILE exists (another node changes the directory in between). --plain: one
# full read only (the reference view). --lax: an entry that is gone by
# its lstat is skipped (another process unlinks meanwhile).
#
# Prints one line per entry, sorted: name, type letter, octal mode, nlink,
# size, uid, mtime in ns, inode number. Exits 1 (message on stderr) when
# the getdents type or inode number of an entry disagrees with its lstat.
import os
import stat
import sys
import time


def one_getdents(d):
    with os.scandir(d) as it:
        next(it, None)


def walk(d, lax):
    out, bad = [], []
    with os.scandir(d) as it:
        for e in it:
            try:
                st = os.lstat(os.path.join(d, e.name))
            except FileNotFoundError:
                if lax:
                    continue
                raise
            kind = ("d" if stat.S_ISDIR(st.st_mode) else
                    "l" if stat.S_ISLNK(st.st_mode) else "f")
            if e.is_dir(follow_symlinks=False) != stat.S_ISDIR(st.st_mode):
                bad.append("%s: getdents type disagrees with lstat" % e.name)
            if e.inode() != st.st_ino:
                # a concurrent unlink and create may reuse the name
                if not lax:
                    bad.append("%s: d_ino %d, st_ino %d" %
                               (e.name, e.inode(), st.st_ino))
            out.append("%s %s %o %d %d %d %d %d" %
                       (e.name, kind, st.st_mode, st.st_nlink, st.st_size,
                        st.st_uid, st.st_mtime_ns, st.st_ino))
    return sorted(out), bad


def main():
    args = sys.argv[1:]
    wait = None
    plain = lax = False
    while args and args[0].startswith("--"):
        a = args.pop(0)
        if a == "--wait":
            wait = args.pop(0)
        elif a == "--plain":
            plain = True
        elif a == "--lax":
            lax = True
        else:
            sys.exit("rdpwalk: unknown option " + a)
    if len(args) != 1:
        sys.exit("usage: rdpwalk.py [--wait FILE] [--plain] [--lax] DIR")
    d = args[0]
    if not plain:
        one_getdents(d)
    if wait is not None:
        open(wait + ".ready", "w").close()
        while not os.path.exists(wait):
            time.sleep(0.01)
    out, bad = walk(d, lax)
    for line in out:
        print(line)
    for b in bad:
        print("rdpwalk: " + b, file=sys.stderr)
    sys.exit(1 if bad else 0)


main()
