"""Reference clients of the Tapis service (`tapis`, `tapis-bot`), over the tapis.v1 stubs only."""
