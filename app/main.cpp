#include "app/commands.h"

int main(int argc, char** argv) { return mpbench::mpbench_main(argc, argv); }
