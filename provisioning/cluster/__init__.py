"""make remote HOSTS=a,b: the nodes (HOSTS=/HOSTFILE=, their agreement), the shell lines across them, one
image on every node. It imports provisioning.session, job and runtime; provisioning.group, drive and remote
import it (the one driver takes a group of one host or of several)."""
