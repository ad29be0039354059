/*
 * lk_mode.c — lock modes as literal tables: compatibility, the lattice
 * order used by the hold cache, and what happens to the lock value block
 * on each transition (the VMS/Linux DLM rules).
 */
#include "lockmgr/lk_grant.h"

/* lk_compat_tab[a][b]: may a lock in mode a be granted while b is held? */
/* clang-format off */
const uint8_t lk_compat_tab[LK_NMODES][LK_NMODES] = {
	/*        NL CR CW PR PW EX */
	/* NL */ { 1, 1, 1, 1, 1, 1 },
	/* CR */ { 1, 1, 1, 1, 1, 0 },
	/* CW */ { 1, 1, 1, 0, 0, 0 },
	/* PR */ { 1, 1, 0, 1, 0, 0 },
	/* PW */ { 1, 1, 0, 0, 0, 0 },
	/* EX */ { 1, 0, 0, 0, 0, 0 },
};

/* covers[have][want]: lattice NL < CR < CW < PW < EX and CR < PR < PW. */
static const uint8_t covers[LK_NMODES][LK_NMODES] = {
	/*        NL CR CW PR PW EX */
	/* NL */ { 1, 0, 0, 0, 0, 0 },
	/* CR */ { 1, 1, 0, 0, 0, 0 },
	/* CW */ { 1, 1, 1, 0, 0, 0 },
	/* PR */ { 1, 1, 0, 1, 0, 0 },
	/* PW */ { 1, 1, 1, 1, 1, 0 },
	/* EX */ { 1, 1, 1, 1, 1, 1 },
};

#define R LK_LVB_RETURN
#define W LK_LVB_WRITE
#define _ LK_LVB_NONE
/* lk_lvbop_tab[from + 1][to]: from -1 (new request) or a granted mode. */
const uint8_t lk_lvbop_tab[LK_NMODES + 1][LK_NMODES] = {
	/*         NL CR CW PR PW EX */
	/* new */ { R, R, R, R, R, R },
	/* NL  */ { R, R, R, R, R, R },
	/* CR  */ { _, R, R, R, R, R },
	/* CW  */ { _, _, R, R, R, R },
	/* PR  */ { _, _, R, R, R, R },
	/* PW  */ { W, W, W, W, W, R },
	/* EX  */ { W, W, W, W, W, W },
};
#undef R
#undef W
#undef _

/* clang-format on */

static const char *const names[LK_NMODES] = {
    "NL", "CR", "CW", "PR", "PW", "EX",
};

static int valid(int m)
{
	return m >= 0 && m < LK_NMODES;
}

int lk_mode_compat(int a, int b)
{
	return lk_compat(a, b);
}

int lk_mode_covers(int have, int want)
{
	return valid(have) && valid(want) && covers[have][want];
}

const char *lk_mode_name(int mode)
{
	return valid(mode) ? names[mode] : "??";
}

int lk_mode_meet(int a, int b)
{
	for (int m = LK_EX; m > LK_NL; m--)
		if (lk_mode_covers(a, m) && lk_mode_covers(b, m))
			return m;
	return LK_NL;
}
