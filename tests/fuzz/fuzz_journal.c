/*
 * fuzz_journal.c — the journal a dead node left behind, damaged: replayed
 * by the next mount (and by fsck -y), then the same walk and checks as
 * fuzz_image.c (fz_image.h).
 *
 * The base image is a node that crashed right after committing a last
 * batch (a rename, an unlink, a mkdir, an xattr): slot 0's journal holds
 * committed transactions that were not written home. Input: byte 0 flags
 * (FZ_F_*), then the journal blocks of both slots that are not all zero
 * (headers, descriptors, images, commits) in block order. Unless FZ_F_RAW
 * each block's crc and each commit's tx_crc are recomputed, so a mutated
 * descriptor or image is replayed rather than rejected as torn.
 */
#include "tests/fuzz/fz_common.h"
#include "tests/fuzz/fz_image.h"

static struct fz_img im;
static uint8_t *dev;

static void setup(void)
{
	if (fz_build(&im, 1) < 0 || (dev = bd_buf_alloc(FZ_DEV_BYTES)) == NULL)
		fz_fail("cannot build the base image");
	fz_map_nonzero(&im, im.jstart, im.jend);
	fz_seed_map(&im);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (dev == NULL)
		setup();
	fz_run(&im, dev, data, size);
	return 0;
}
