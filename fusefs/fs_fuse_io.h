/*
 * fs_fuse_io.h — ucfs's /dev/fuse transport under libfuse (fs_fuse_io.c):
 * negotiates FUSE_HANDLE_KILLPRIV_V2 and exposes a write's kill flag.
 */
#ifndef UCFS_FS_FUSE_IO_H
#define UCFS_FS_FUSE_IO_H

#include <fuse_lowlevel.h>

/* Route the mounted session's requests and replies through ucfs's
 * read/writev. Call after fuse_session_mount(), before the loop. */
int fs_fuse_io_attach(struct fuse_session *se);

/* 1 once the kernel accepted FUSE_HANDLE_KILLPRIV_V2: it no longer drops
 * privileges on write/truncate/chown itself; ucfs must. */
int fs_fuse_io_killpriv_v2(void);

/* In a write handler: 1 if the kernel asked for S_ISUID/S_ISGID to be
 * cleared (the writer lacks CAP_FSETID). */
int fs_fuse_io_write_kill(void);

#endif
