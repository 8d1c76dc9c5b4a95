/* gridwire's extensions to the MPI interface (include after mpi.h).
 * See docs/mpi.md, "Topology levels". */
#ifndef GRIDWIRE_MPI_H
#define GRIDWIRE_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

/* Predefined, read-only communicator attribute keyvals (as MPICH-G2's
 * MPICHX_TOPOLOGY_DEPTHS / MPICHX_TOPOLOGY_COLORS):
 *   int *depths;  MPI_Comm_get_attr(comm, GW_TOPOLOGY_DEPTHS, &depths, &flag);
 *     depths[r] = number of levels of member r (2: site, host);
 *   int **colors; MPI_Comm_get_attr(comm, GW_TOPOLOGY_COLORS, &colors, &flag);
 *     colors[r][0] = site of member r, colors[r][1] = its host within the
 *     site, numbered 0, 1, ... in order of first appearance in comm.
 * The arrays belong to the library and live as long as the communicator. */
extern const int GW_TOPOLOGY_DEPTHS;
extern const int GW_TOPOLOGY_COLORS;

/* Values of the "mpi_hw_resource_type" info key of MPI_Comm_split_type. */
#define GW_HW_RESOURCE_HOST "gw:host"
#define GW_HW_RESOURCE_SITE "gw:site"

#ifdef __cplusplus
}
#endif
#endif
