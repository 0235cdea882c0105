# cli/: the zbmd command (main + subcommand dispatch). Links every module.
MODULES += cli
# Every other module, so that a module's commands are reachable once it lands.
cli_DEPS = $(filter-out cli,$(MODULES))
BINS += $(BUILD)/bin/zbmd
