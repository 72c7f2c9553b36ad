/* next_base.c — libnext_base.so: the definition libnext_wrap.so finds with RTLD_NEXT. */
int next_value(void);
int next_value(void)
{
    return 41;
}
