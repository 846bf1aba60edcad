"""Reference clients of the Tapis service (`tapis`, `tapis-bot`): they use only the tapis.v1 stubs."""
