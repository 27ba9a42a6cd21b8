/* The transports the net layer offers, in order of preference
 * (net/core/transport.h): verbs where every rail of a device has an RDMA
 * port, sockets for everything else. The only place that names them. */
#include "net/core/transport.h"

extern const struct rail_transport rail_transport_socket;
extern const struct rail_transport rail_transport_verbs;

const struct rail_transport *const rail_transports[] = {&rail_transport_verbs,
                                                        &rail_transport_socket};
const int rail_ntransports = sizeof(rail_transports) / sizeof(rail_transports[0]);
